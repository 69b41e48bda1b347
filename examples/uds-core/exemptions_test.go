package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/vigiltest"
)

// exemption is an Exemption of namespace with one entry.
func exemption(namespace, name string, policies []Policy, matcher Matcher) *unstructured.Unstructured {
	ps := make([]any, len(policies))
	for i, p := range policies {
		ps[i] = string(p)
	}
	m := map[string]any{"namespace": matcher.Namespace, "name": matcher.Name}
	if matcher.Kind != "" {
		m["kind"] = matcher.Kind
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "uds.dev/v1alpha1", "kind": "Exemption",
		"metadata": map[string]any{"namespace": namespace, "name": name},
		"spec":     map[string]any{"exemptions": []any{map[string]any{"policies": ps, "matcher": m}}},
	}}
}

// privilegedPod is a privileged Pod of namespace, its other settings
// compliant.
func privilegedPod(namespace, name string) *corev1.Pod {
	p := testPod(name, func(p *corev1.Pod) {
		p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	})
	p.Namespace = namespace
	return p
}

// setAllowAll sets the ClusterConfig's spec.policy.allowAllNsExemptions.
func setAllowAll(t *testing.T, allow bool) {
	t.Helper()
	cc := clusterConfigKind()
	cc.SetName(ClusterConfigName)
	patch := []byte(fmt.Sprintf(`{"spec":{"policy":{"allowAllNsExemptions":%t}}}`, allow))
	if err := env.Client.Patch(context.Background(), cc, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Error(err)
	}
}

// UDS Core's exemption tests (src/pepr/policies/exemptions/index.spec.ts,
// describe "test registering exemptions"), there unit tests of isExempt
// over a mocked store; here the same Exemption, in uds-policy-exemptions,
// and the same two Pods, through the API server.
func TestRegisteringExemptions(t *testing.T) {
	startUDSCore(t)
	namespace(t, "falco")
	namespace(t, "monitoring")
	ex := exemption(ExemptionsNamespace, "falco", []Policy{DisallowPrivileged}, Matcher{Namespace: "falco", Name: "^falco-.*", Kind: "pod"})
	if err := apply(t, ex); err != nil {
		t.Fatal(err)
	}

	t.Run("should be exempt", func(t *testing.T) {
		pod := privilegedPod("falco", "falco-pod-x")
		vigiltest.Eventually(t, 10*time.Second, func() error { return apply(t, pod) })
		if got := pod.Annotations[ExemptionAnnotationPrefix+".DisallowPrivileged"]; got != "exempted" {
			t.Errorf("the admitted Pod's annotations %v: want %s.DisallowPrivileged: exempted", pod.Annotations, ExemptionAnnotationPrefix)
		}
	})
	t.Run("should not be exempt", func(t *testing.T) {
		denied(t, "a privileged Pod vector in monitoring", apply(t, privilegedPod("monitoring", "vector")), "Privilege escalation is disallowed")
	})
}

// An Exemption exempts from the policies it lists and no other; it counts
// in uds-policy-exemptions only, unless the ClusterConfig allows all
// namespaces, and the ClusterConfig's setting is read as it is at the
// request; its validation refuses what UDS Core's does, with UDS Core's
// messages.
func TestExemptionSemantics(t *testing.T) {
	startUDSCore(t)
	namespace(t, "falco")
	namespace(t, "tenant")
	t.Cleanup(func() { setAllowAll(t, false) })

	if err := apply(t, exemption(ExemptionsNamespace, "falco-privileged", []Policy{DisallowPrivileged}, Matcher{Namespace: "falco", Name: "^falco-", Kind: "pod"})); err != nil {
		t.Fatal(err)
	}
	t.Run("only the listed policies", func(t *testing.T) {
		pod := privilegedPod("falco", "falco-host")
		pod.Spec.HostNetwork = true
		var err error
		vigiltest.Eventually(t, 10*time.Second, func() error {
			err = apply(t, pod.DeepCopy())
			if err != nil && strings.Contains(err.Error(), "Privilege escalation is disallowed") {
				return fmt.Errorf("the Exemption is not honoured yet: %v", err)
			}
			return nil
		})
		denied(t, "a privileged Pod on the host network, exempt from DisallowPrivileged only", err, "Sharing the host namespaces is disallowed")
		if strings.Contains(err.Error(), "Privilege escalation") {
			t.Errorf("denial %q names the policy the Pod is exempt from", err)
		}
	})
	t.Run("the mutations record what they did", func(t *testing.T) {
		pod := testPod("mutated", nil)
		if err := apply(t, pod); err != nil {
			t.Fatal(err)
		}
		var list []string
		if err := json.Unmarshal([]byte(pod.Annotations[MutatedAnnotation]), &list); err != nil {
			t.Fatalf("annotation %s = %q: %v", MutatedAnnotation, pod.Annotations[MutatedAnnotation], err)
		}
		want := []string{"disallow-privileged", "require-non-root-user", "drop-all-capabilities"}
		if strings.Join(list, ",") != strings.Join(want, ",") {
			t.Errorf("%s = %q, want %q (UDS Core's mutations, in order)", MutatedAnnotation, list, want)
		}
		sc, psc := pod.Spec.Containers[0].SecurityContext, pod.Spec.SecurityContext
		if sc == nil || ptr.Deref(sc.AllowPrivilegeEscalation, true) || psc == nil || ptr.Deref(psc.RunAsUser, 0) != 1000 ||
			ptr.Deref(psc.RunAsGroup, 0) != 1000 || !ptr.Deref(psc.RunAsNonRoot, false) {
			t.Errorf("the Pod as stored: container %+v, pod %+v; want allowPrivilegeEscalation false, runAsNonRoot, user and group 1000", sc, psc)
		}
	})
	t.Run("the namespaces an Exemption counts in", func(t *testing.T) {
		refused := apply(t, exemption("tenant", "mine", []Policy{DisallowPrivileged}, Matcher{Namespace: "tenant", Name: ".*", Kind: "pod"}))
		denied(t, "an Exemption in tenant", refused, `Invalid namespace "tenant" for UDSExemption mine: must be "uds-policy-exemptions"`)

		setAllowAll(t, true)
		vigiltest.Eventually(t, 10*time.Second, func() error {
			return apply(t, exemption("tenant", "mine", []Policy{DisallowPrivileged}, Matcher{Namespace: "tenant", Name: ".*", Kind: "pod"}))
		})
		vigiltest.Eventually(t, 10*time.Second, func() error { return apply(t, privilegedPod("tenant", "while-allowed")) })

		// Switched off: the tenant's Exemption stays, and no longer counts,
		// from the next request on.
		setAllowAll(t, false)
		denied(t, "a privileged Pod of tenant, once all namespaces no longer count", apply(t, privilegedPod("tenant", "after")), "Privilege escalation is disallowed")
	})
	t.Run("an Exemption is validated as UDS Core validates it", func(t *testing.T) {
		for _, c := range []struct {
			policies []Policy
			matcher  Matcher
			want     string
		}{
			{[]Policy{DisallowNodePortServices}, Matcher{Namespace: "a", Name: "x", Kind: "pod"},
				`Invalid kind "pod" for matcher "x" with policy "DisallowNodePortServices": "DisallowNodePortServices" can only be exempted for kind "service"`},
			{[]Policy{DisallowPrivileged}, Matcher{Namespace: "a", Name: "x", Kind: "service"},
				`Invalid kind "service" for matcher "x" with policy "DisallowPrivileged": "DisallowPrivileged" can only be exempted for kind "pod"`},
			{[]Policy{DisallowPrivileged}, Matcher{Namespace: "a", Name: "/falco/"},
				`Invalid matcher name "/falco/": please remove the leading and trailing slashes`},
			{[]Policy{DisallowPrivileged}, Matcher{Namespace: "a", Name: "falco-("},
				`Invalid regular expression pattern falco-(:`},
		} {
			denied(t, fmt.Sprintf("an Exemption of %v for %+v", c.policies, c.matcher),
				apply(t, exemption(ExemptionsNamespace, "bad", c.policies, c.matcher)), c.want)
		}
	})
}

// The watcher sets the ClusterConfig's status as UDS Core's operator does:
// Ready, at the generation it took in, again after an edit.
func TestClusterConfigStatus(t *testing.T) {
	startUDSCore(t)
	ready := func(generation int64) func() error {
		return func() error {
			cc := clusterConfigKind()
			if err := env.Client.Get(t.Context(), client.ObjectKey{Name: ClusterConfigName}, cc); err != nil {
				return err
			}
			phase, _, _ := unstructured.NestedString(cc.Object, "status", "phase")
			observed, _, _ := unstructured.NestedInt64(cc.Object, "status", "observedGeneration")
			if phase != "Ready" || observed < generation || observed != cc.GetGeneration() {
				return fmt.Errorf("status phase %q observedGeneration %d, generation %d", phase, observed, cc.GetGeneration())
			}
			return nil
		}
	}
	vigiltest.Eventually(t, 20*time.Second, ready(1))
	cc := clusterConfigKind()
	if err := env.Client.Get(t.Context(), client.ObjectKey{Name: ClusterConfigName}, cc); err != nil {
		t.Fatal(err)
	}
	before := cc.GetGeneration()
	patch := []byte(`{"spec":{"attributes":{"clusterName":"renamed"}}}`)
	if err := env.Client.Patch(t.Context(), cc, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatal(err)
	}
	if cc.GetGeneration() <= before {
		t.Fatalf("generation %d after an edit of the spec, want more than %d", cc.GetGeneration(), before)
	}
	vigiltest.Eventually(t, 20*time.Second, ready(cc.GetGeneration()))
}

// Without a ClusterConfig, phase 1 waits its bounded time and then the
// operator config's settings and UDS Core's defaults stand in, as the
// discussion vigil started from asked; admission comes up and enforces.
func TestNoClusterConfigFallsBackToTheOperatorConfig(t *testing.T) {
	udsCRDs(t)
	cc := clusterConfigKind()
	cc.SetName(ClusterConfigName)
	if err := env.Client.Delete(t.Context(), cc); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Create(context.Background(), clusterConfig(false)) })
	namespace(t, PolicyTests)
	m := env.InstallModule(t, vigiltest.ModuleOptions{Dir: ".", Env: []string{"UDS_CLUSTERCONFIG_TIMEOUT=2s"}})
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: OperatorConfigSecret},
		StringData: map[string]string{"KEYCLOAK_CLIENT_MODE": "SIGNED_JWT"}}
	if err := env.Client.Create(t.Context(), secret); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	runs := m.RunGates(time.Minute)
	if len(runs) != 3 || !strings.Contains(runs[1].Output, "stand in for it") {
		t.Fatalf("phase 1 did not fall back:\n%+v", runs)
	}
	logged := false
	for _, r := range runs {
		for _, line := range strings.Split(r.Output, "\n") {
			if strings.Contains(line, `msg=configuration`) {
				if !strings.Contains(line, "fromClusterConfig=false") || !strings.Contains(line, "allowAllNSExemptions=false") {
					t.Errorf("phase 1's configuration %q: want the defaults, not from a ClusterConfig", line)
				}
				logged = true
			}
		}
	}
	if !logged {
		t.Errorf("phase 1 logged no configuration:\n%s", runs[1].Output)
	}
	m.StartAdmission(time.Minute)
	denied(t, "a privileged Pod", apply(t, privilegedPod(PolicyTests, "fallback-privileged")), "Privilege escalation is disallowed")
}

// The policies fail closed everywhere but istio-system, as UDS Core's ADR
// 0004 keeps them: with the module down, a Pod in istio-system is admitted
// and one elsewhere is refused; the webhook that answers for istio-system
// is one of its own, failurePolicy Ignore.
func TestPoliciesFailOpenInIstioSystemOnly(t *testing.T) {
	m := startUDSCore(t)
	namespace(t, IstioSystem)
	val, err := env.Clientset.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(t.Context(), m.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, w := range val.Webhooks {
		if w.Name != "ignore."+CapabilityName+".validate.uds-core.vigil.dev" {
			continue
		}
		found = true
		sel := fmt.Sprint(w.NamespaceSelector.MatchExpressions)
		if ptr.Deref(w.FailurePolicy, "") != "Ignore" || !strings.Contains(sel, "In ["+IstioSystem+"]") {
			t.Errorf("webhook %s: failurePolicy %v, namespaceSelector %s; want Ignore, in %s only", w.Name, ptr.Deref(w.FailurePolicy, ""), sel, IstioSystem)
		}
	}
	if !found {
		t.Fatalf("no webhook of its own for %s among %d", IstioSystem, len(val.Webhooks))
	}
	m.AdmissionPod().Stop()
	pod := testPod("while-down", nil)
	pod.Namespace = IstioSystem
	if err := apply(t, pod); err != nil {
		t.Errorf("a Pod in %s while the module is down: %v; want it admitted (failurePolicy Ignore there)", IstioSystem, err)
	}
	err = apply(t, testPod("while-down", nil))
	if err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
		t.Errorf("a Pod in %s while the module is down: %v; want it refused (failurePolicy Fail)", PolicyTests, err)
	}
}
