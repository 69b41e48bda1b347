package admission

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/commands/cmdutil"
	"github.com/vigilkit/vigil/internal/commands/modcli"
	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/testsupport/testkit"
	"github.com/vigilkit/vigil/vigiltest"
)

// As a user who may only create and change Namespaces and Pods, against a
// module registered by its admission role (--bootstrap, as vigil dev runs
// it): a namespace labelled vigil.dev/ignore=true gets no privileged Pod past
// the module, and a capability's opt-out label can be set only by whom its
// author allowed — also once the module has stopped.
func TestNoSilentOptOut(t *testing.T) {
	ctx := t.Context()
	home, apps := env.Namespace(t), env.Namespace(t)
	suffix := home[len(home)-6:]
	name := "optout-" + suffix
	sneaky, skipped := "sneaky-"+suffix, "skipped-"+suffix
	mallory, alice := name+"-mallory", name+"-alice"
	const skip = "quota.example.dev/skip"
	bootstrapConfigs(t, name)
	t.Cleanup(func() {
		api := env.Clientset.AdmissionregistrationV1()
		_ = api.ValidatingAdmissionPolicyBindings().Delete(context.Background(), spec.GuardName(name, "quota"), metav1.DeleteOptions{})
		_ = api.ValidatingAdmissionPolicies().Delete(context.Background(), spec.GuardName(name, "quota"), metav1.DeleteOptions{})
	})

	m := vigil.NewModule(name, vigil.Options{Namespace: home})
	policies := m.Capability("policies", vigil.InNamespaces(apps, sneaky, skipped))
	vigil.When(policies, &corev1.Pod{}).IsCreated().Named("no-privileged").Validate(func(_ context.Context, r *vigil.Request[*corev1.Pod]) vigil.Verdict {
		for _, c := range r.Object.Spec.Containers {
			if c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged {
				return admission.Deny("privileged pods are not allowed")
			}
		}
		return admission.Allow()
	})
	quota := m.Capability("quota", vigil.InNamespaces(apps, sneaky, skipped), vigil.OptOutLabel(skip, alice))
	vigil.When(quota, &corev1.Pod{}).IsCreated().Named("no-huge").Validate(func(_ context.Context, r *vigil.Request[*corev1.Pod]) vigil.Verdict {
		if r.Object.Labels["size"] == "huge" {
			return admission.Deny("huge pods are over quota")
		}
		return admission.Allow()
	})

	users := fewRights(t, name, mallory, alice)
	mc, ac := users[0], users[1]

	_, certDir := testkit.ServingDir(t)
	addr := vigiltest.FreeAddr(t)
	t.Setenv(modcli.EnvHandoffDir, t.TempDir())
	stop := testkit.RunAdmission(t, m, addr, "--cert-dir", certDir, "--kubeconfig", kubeconfig(t), "--shutdown-delay", "0s",
		"--webhook-url", "https://"+addr, "--bootstrap")
	// Registered and enforced once a privileged Pod in apps is denied; RBAC
	// reaching the authorizer is part of the wait.
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		err := mc.Create(ctx, testkit.TestPod(apps, fmt.Sprint("probe-", i), nil, true))
		if err != nil && strings.Contains(err.Error(), "privileged pods are not allowed") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the module never denied a privileged pod: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// The guard --bootstrap created takes effect once the API server's
	// policy informer has it: wait for its first refusal.
	deadline = time.Now().Add(20 * time.Second)
	for i := 0; ; i++ {
		err := mc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-w-%d", name, i), Labels: map[string]string{skip: "true"}}})
		if apierrors.IsForbidden(err) && strings.Contains(err.Error(), "may set, change or remove the label "+skip) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the opt-out guard never refused mallory a labelled namespace: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// (a) The label that used to opt a namespace out of every webhook does
	// nothing: mallory may set it, and it gets nothing past.
	if err := mc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sneaky, Labels: map[string]string{"vigil.dev/ignore": "true"}}}); err != nil {
		t.Fatal(err)
	}
	if err := mc.Create(ctx, testkit.TestPod(sneaky, "privileged", map[string]string{"vigil.dev/ignore": "true"}, true)); err == nil || !strings.Contains(err.Error(), "privileged pods are not allowed") {
		t.Fatalf("a privileged pod in a namespace labelled vigil.dev/ignore=true: err = %v, want denied", err)
	}

	// (b) The capability's own opt-out label is refused to mallory, on
	// namespaces and Pods, on create and update; alice may set it, and it
	// opts out of that capability only.
	refused := func(what string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "may set, change or remove the label "+skip) {
			t.Errorf("%s: err = %v, want refused by the opt-out guard", what, err)
		}
	}
	labelPatch := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:"true"}}}`, skip)))
	checkGuard := func(when string) {
		t.Helper()
		refused(when+": mallory creates a namespace with the label", mc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-m-%d", name, time.Now().UnixNano()), Labels: map[string]string{skip: "true"}}}))
		refused(when+": mallory labels a namespace", mc.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sneaky}}, labelPatch))
		refused(when+": mallory labels a pod", mc.Patch(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: "plain"}}, labelPatch))
		if err := ac.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-a-%d", name, time.Now().UnixNano()), Labels: map[string]string{skip: "true"}}}); err != nil {
			t.Errorf("%s: alice creates a namespace with the label: %v", when, err)
		}
	}
	if err := mc.Create(ctx, testkit.TestPod(apps, "plain", nil, false)); err != nil {
		t.Fatal(err)
	}
	refused("mallory creates a pod with the label", mc.Create(ctx, testkit.TestPod(apps, "labelled", map[string]string{skip: "true", "size": "huge"}, false)))
	checkGuard("module running")
	if err := mc.Create(ctx, testkit.TestPod(apps, "huge", map[string]string{"size": "huge"}, false)); err == nil || !strings.Contains(err.Error(), "over quota") {
		t.Fatalf("a huge pod without the opt-out label: err = %v, want denied", err)
	}
	if err := ac.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: skipped, Labels: map[string]string{skip: "true"}}}); err != nil {
		t.Fatalf("alice creates a namespace with the label: %v", err)
	}
	if err := mc.Create(ctx, testkit.TestPod(skipped, "huge", map[string]string{"size": "huge"}, false)); err != nil {
		t.Fatalf("a huge pod in a namespace alice opted out of quota: %v", err)
	}
	if err := mc.Create(ctx, testkit.TestPod(skipped, "privileged", nil, true)); err == nil || !strings.Contains(err.Error(), "privileged pods are not allowed") {
		t.Fatalf("a privileged pod in a namespace opted out of quota only: err = %v, want denied by policies", err)
	}
	if err := ac.Create(ctx, testkit.TestPod(apps, "huge-labelled", map[string]string{skip: "true", "size": "huge"}, false)); err != nil {
		t.Fatalf("alice creates a huge pod with the opt-out label: %v", err)
	}

	// The module stops: the guard, evaluated by the API server, still holds.
	stop()
	checkGuard("module stopped")
}

// The opt-out label is a definition mistake on a fail-closed capability, and
// when nobody may set it, named at the OptOutLabel call.
func TestOptOutLabelMistakes(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts func() []vigil.CapabilityOption
		want string
	}{
		{"fail-closed", func() []vigil.CapabilityOption {
			return []vigil.CapabilityOption{vigil.FailClosed(), vigil.OptOutLabel("vigil.dev/ignore", "alice")}
		}, "a fail-closed capability checks everything it matches: it cannot have an opt-out label"},
		{"fail-closed given after", func() []vigil.CapabilityOption {
			return []vigil.CapabilityOption{vigil.OptOutLabel("vigil.dev/ignore", "alice"), vigil.FailClosed()}
		}, "a fail-closed capability checks everything it matches: it cannot have an opt-out label"},
		{"nobody allowed", func() []vigil.CapabilityOption {
			return []vigil.CapabilityOption{vigil.OptOutLabel("vigil.dev/ignore")}
		}, "nobody is allowed to set the label"},
		{"not a label key", func() []vigil.CapabilityOption {
			return []vigil.CapabilityOption{vigil.OptOutLabel("no spaces", "alice")}
		}, "not a label key"},
		{"reserved prefix", func() []vigil.CapabilityOption {
			return []vigil.CapabilityOption{vigil.OptOutLabel("kubernetes.io/ignore", "alice")}
		}, "reserved for Kubernetes"},
		{"empty group", func() []vigil.CapabilityOption {
			return []vigil.CapabilityOption{vigil.OptOutLabel("vigil.dev/ignore", "group:")}
		}, `allowed "group:"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := vigil.NewModule("mod", vigil.Options{})
			c := m.Capability("strict", tc.opts()...)
			vigil.When(c, &corev1.Pod{}).IsCreated().Validate(func(context.Context, *vigil.Request[*corev1.Pod]) vigil.Verdict { return admission.Allow() })
			err := m.Verify()
			if err == nil {
				t.Fatal("Verify() = nil, want the mistake")
			}
			for _, w := range []string{"optout_test.go:", `capability strict: OptOutLabel(`, tc.want} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Verify() = %q, want it to contain %q", err, w)
				}
			}
			if code := vigil.Execute(t.Context(), m, []string{"plan"}); code != cmdutil.ExitFailed {
				t.Errorf("plan with the mistake: exit %d, want %d", code, cmdutil.ExitFailed)
			}
		})
	}
	m := vigil.NewModule("mod", vigil.Options{})
	m.Capability("lenient", vigil.OptOutLabel("vigil.dev/ignore", "alice", "group:admins", "system:serviceaccount:ops:deployer"))
	if err := m.Verify(); err != nil {
		t.Fatalf("a well-formed opt-out label: %v", err)
	}
}
