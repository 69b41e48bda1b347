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
	"github.com/vigilkit/vigil/internal/commands/modcli"
	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/testsupport/testkit"
	"github.com/vigilkit/vigil/vigiltest"
)

// As a user who may only create and change Namespaces and Pods, against a
// module registered by its admission role: a capability with an opt-in
// label judges only the namespaces labelled with it; only whom its author
// allowed may set or remove the label, so a tenant cannot switch the policy
// off in a namespace that opted in — also once the module has stopped.
func TestOptInLabel(t *testing.T) {
	ctx := t.Context()
	home, plain := env.Namespace(t), env.Namespace(t)
	suffix := home[len(home)-6:]
	name := "optin-" + suffix
	enrolled := "enrolled-" + suffix
	mallory, alice := name+"-mallory", name+"-alice"
	const enforce = "quota.example.dev/enforce"
	bootstrapConfigs(t, name)
	t.Cleanup(func() {
		api := env.Clientset.AdmissionregistrationV1()
		_ = api.ValidatingAdmissionPolicyBindings().Delete(context.Background(), spec.OptInGuardName(name, "quota"), metav1.DeleteOptions{})
		_ = api.ValidatingAdmissionPolicies().Delete(context.Background(), spec.OptInGuardName(name, "quota"), metav1.DeleteOptions{})
	})

	m := vigil.NewModule(name, vigil.Options{Namespace: home})
	quota := m.Capability("quota", vigil.OptInLabel(enforce, alice))
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

	// alice enrolls a namespace; once the module enforces there (RBAC and
	// registration reaching the API server are part of the wait), a huge
	// Pod is denied in it.
	if err := ac.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: enrolled, Labels: map[string]string{enforce: "true"}}}); err != nil {
		t.Fatalf("alice creates a namespace with the opt-in label: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		err := mc.Create(ctx, testkit.TestPod(enrolled, fmt.Sprint("probe-", i), map[string]string{"size": "huge"}, false))
		if err != nil && strings.Contains(err.Error(), "huge pods are over quota") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the module never denied a huge pod in the enrolled namespace: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// A namespace without the label is not judged.
	if err := mc.Create(ctx, testkit.TestPod(plain, "huge", map[string]string{"size": "huge"}, false)); err != nil {
		t.Fatalf("a huge pod in a namespace that did not opt in: %v; want it admitted", err)
	}

	// mallory cannot take the label off, nor set it: the guard refuses her,
	// once the API server's policy informer has it.
	unlabel := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, enforce)))
	refused := func(what string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "may set, change or remove the label "+enforce+": it opts namespaces into module "+name+"'s capability quota") {
			t.Errorf("%s: err = %v, want refused by the opt-in guard", what, err)
		}
	}
	// (Probed with new namespaces, each labelled: a probe let through
	// before the guard holds changes nothing the test looks at.)
	probe := 0
	vigiltest.Eventually(t, 20*time.Second, func() error {
		probe++
		err := mc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-w-%d", name, probe), Labels: map[string]string{enforce: "true"}}})
		if apierrors.IsForbidden(err) {
			return nil
		}
		return fmt.Errorf("mallory creates a namespace with the opt-in label: %v; want refused", err)
	})
	checkGuard := func(when string) {
		t.Helper()
		refused(when+": mallory removes the label", mc.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: enrolled}}, unlabel))
		refused(when+": mallory changes the label", mc.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: enrolled}},
			client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:"false"}}}`, enforce)))))
		ns := &corev1.Namespace{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: enrolled}, ns); err != nil || ns.Labels[enforce] != "true" {
			t.Errorf("%s: namespace %s labels %v (%v); want %s=true kept", when, enrolled, ns.Labels, err, enforce)
		}
	}
	checkGuard("module running")
	if err := mc.Create(ctx, testkit.TestPod(enrolled, "huge", map[string]string{"size": "huge"}, false)); err == nil || !strings.Contains(err.Error(), "over quota") {
		t.Fatalf("a huge pod in the enrolled namespace: %v; want denied", err)
	}
	stop()
	checkGuard("module stopped")
}

// An opt-in label with an opt-out label, on a fail-closed capability, or
// with nobody allowed is a definition mistake, named at its call.
func TestOptInLabelMistakes(t *testing.T) {
	for name, tc := range map[string]struct {
		opts []vigil.CapabilityOption
		want string
	}{
		"with opt-out":   {[]vigil.CapabilityOption{vigil.OptOutLabel("a.dev/skip", "alice"), vigil.OptInLabel("a.dev/enforce", "alice")}, "a capability is opt-in or opt-out, not both"},
		"fail-closed":    {[]vigil.CapabilityOption{vigil.FailClosed(), vigil.OptInLabel("a.dev/enforce", "alice")}, "it cannot have an opt-in label; drop OptInLabel or FailClosed"},
		"nobody allowed": {[]vigil.CapabilityOption{vigil.OptInLabel("a.dev/enforce")}, "nobody is allowed to set the label"},
	} {
		t.Run(name, func(t *testing.T) {
			m := vigil.NewModule("mod", vigil.Options{})
			c := m.Capability("strict", tc.opts...)
			vigil.When(c, &corev1.Pod{}).IsCreated().Validate(func(context.Context, *vigil.Request[*corev1.Pod]) vigil.Verdict { return admission.Allow() })
			err := m.Verify()
			for _, w := range []string{"optin_test.go:", "capability strict: OptInLabel(", tc.want} {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("Verify() = %v, want it to contain %q", err, w)
				}
			}
		})
	}
}
