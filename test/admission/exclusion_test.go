package admission

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/commands/cmdutil"
	"github.com/vigilkit/vigil/internal/commands/modcli"
	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/testsupport/testkit"
	"github.com/vigilkit/vigil/vigiltest"
)

// noPrivileged is the Require expression of the tests below: no container
// runs privileged.
const noPrivileged = `!object.spec.containers.exists(c, has(c.securityContext) && has(c.securityContext.privileged) && c.securityContext.privileged)`

// deleteChecks deletes the ValidatingAdmissionPolicies (and bindings) of a
// module's checks after the test.
func deleteChecks(t *testing.T, module string, names ...[2]string) {
	t.Cleanup(func() {
		api := env.Clientset.AdmissionregistrationV1()
		for _, n := range names {
			name := spec.CheckName(module, n[0], n[1])
			_ = api.ValidatingAdmissionPolicyBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
			_ = api.ValidatingAdmissionPolicies().Delete(context.Background(), name, metav1.DeleteOptions{})
		}
	})
}

// A gate names the one object it waits for, and the module's webhooks and
// checks exclude exactly that one: as a user who may create Pods in her own
// namespaces only, a privileged Pod named after the gated Pod is denied by
// the webhook and by the Require check there; the gated Pod itself, in its
// namespace, passes the check while the module waits for it, and the
// webhook once the module serves. plan lists the exclusion with its
// namespace.
func TestGateExcludesExactlyTheObjectItWaitsFor(t *testing.T) {
	ctx := t.Context()
	home, infra, web, checked := env.Namespace(t), env.Namespace(t), env.Namespace(t), env.Namespace(t)
	suffix := home[len(home)-6:]
	name := "excl-" + suffix
	bootstrapConfigs(t, name)
	deleteChecks(t, name, [2]string{"checks", "no-privileged"})

	m := vigil.NewModule(name, vigil.Options{Namespace: home})
	vigil.WaitFor(m, &corev1.Pod{}).WithName("seed").InNamespace(infra).Named("seed").ToBeCreated(nil)
	hooks := m.Capability("hooks", vigil.InNamespaces(infra, web))
	vigil.When(hooks, &corev1.Pod{}).IsCreated().Named("no-privileged").Validate(testkit.DenyPrivileged)
	checks := m.Capability("checks", vigil.InNamespaces(infra, checked))
	vigil.When(checks, &corev1.Pod{}).IsCreated().Named("no-privileged").Require(noPrivileged, "privileged pods are refused by the check")

	code, plan := testkit.RunCapture(t, m, "plan")
	line := "Pod seed in namespace " + infra + ": gate seed (exclusion_test.go:"
	if code != 0 || strings.Count(plan, line) != 2 {
		t.Errorf("plan (exit %d) does not list the exclusion with its namespace, once per capability (%q):\n%s", code, line, plan)
	}

	mallory := tenant(t, name+"-mallory", "", "pods", web, checked)
	byCheck := func(err error) bool {
		return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "privileged pods are refused by the check")
	}
	byWebhook := func(err error) bool {
		return err != nil && strings.Contains(err.Error(), "privileged pods are not allowed")
	}

	_, certDir := testkit.ServingDir(t)
	addr := vigiltest.FreeAddr(t)
	t.Setenv(modcli.EnvHandoffDir, t.TempDir())
	testkit.RunAdmission(t, m, addr, "--cert-dir", certDir, "--kubeconfig", kubeconfig(t), "--shutdown-delay", "0s",
		"--webhook-url", "https://"+addr, "--bootstrap", "--registration-check-interval", "200ms")

	// The check --bootstrap created is in force once the API server's
	// policy informer has it (RBAC reaching the authorizer is in the wait).
	testkit.Until(t, 30*time.Second, "the check refuses mallory a privileged pod", func(i int) error {
		return mallory.Create(ctx, testkit.TestPod(checked, fmt.Sprint("probe-", i), nil, true), client.DryRunAll)
	}, byCheck)

	// The module waits for its gate: the gated Pod passes the check.
	seed := testkit.TestPod(infra, "seed", nil, true)
	if err := env.Client.Create(ctx, seed); err != nil {
		t.Fatalf("the privileged Pod the gate waits for, in its namespace %s: %v, want it to pass the check: the module would never start", infra, err)
	}
	if err := env.Client.Create(ctx, testkit.TestPod(infra, "other", nil, true), client.DryRunAll); !byCheck(err) {
		t.Errorf("another privileged Pod in %s: err = %v, want refused by the check", infra, err)
	}
	if code := vigil.Execute(ctx, m, []string{"gate", "--phase", "0", "--kubeconfig", kubeconfig(t)}); code != 0 {
		t.Fatalf("gate exit %d", code)
	}
	testkit.Until(t, 30*time.Second, "the module registers and denies mallory a privileged pod", func(i int) error {
		return mallory.Create(ctx, testkit.TestPod(web, fmt.Sprint("probe-", i), nil, true), client.DryRunAll)
	}, byWebhook)

	// Named after the gated Pod, in her own namespaces: denied by both.
	if err := mallory.Create(ctx, testkit.TestPod(web, "seed", nil, true)); !byWebhook(err) {
		t.Errorf("mallory's privileged Pod seed in %s: err = %v, want denied by the webhook", web, err)
	}
	if err := mallory.Create(ctx, testkit.TestPod(checked, "seed", nil, true)); !byCheck(err) {
		t.Errorf("mallory's privileged Pod seed in %s: err = %v, want refused by the check", checked, err)
	}
	// The gated Pod itself, re-created while the webhook enforces: it passes
	// both.
	if err := env.Client.Delete(ctx, seed, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	vigiltest.Eventually(t, 30*time.Second, func() error {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(seed), &corev1.Pod{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("Pod %s/seed not gone yet: %v", infra, err)
	})
	if err := env.Client.Create(ctx, testkit.TestPod(infra, "seed", nil, true)); err != nil {
		t.Errorf("the privileged Pod the gate waits for, re-created in %s while the module enforces: %v, want it to pass", infra, err)
	}
	if err := env.Client.Create(ctx, testkit.TestPod(infra, "other", nil, true), client.DryRunAll); !byWebhook(err) && !byCheck(err) {
		t.Errorf("another privileged Pod in %s: err = %v, want denied", infra, err)
	}
}

// A gate by name on a namespaced kind without InNamespace looks in every
// namespace: its exclusion would exempt every object of that kind and name,
// so when the module's webhooks or checks govern the kind the definition
// fails, naming the gate's call site and what to do; plan, manifests and the
// roles refuse it.
func TestGateByNameInEveryNamespaceOnAGovernedKindIsAMistake(t *testing.T) {
	for _, tc := range []struct {
		name    string
		declare func(m *vigil.Module)
		want    []string
	}{
		{"a webhook governs it", func(m *vigil.Module) {
			vigil.When(m.Capability("hooks"), &corev1.Pod{}).IsCreated().Named("no-privileged").Validate(testkit.DenyPrivileged)
		}, []string{"webhook hooks/no-privileged (exclusion_test.go:"}},
		{"a check governs it", func(m *vigil.Module) {
			vigil.When(m.Capability("checks"), &corev1.Pod{}).IsCreated().Named("no-privileged").Require(noPrivileged, "no")
		}, []string{"check checks/no-privileged (exclusion_test.go:"}},
		{"a cluster-scoped kind in a namespace", func(m *vigil.Module) {
			vigil.WaitFor(m, &corev1.Namespace{}).WithName("team").InNamespace("team").ToBeCreated(nil)
			vigil.When(m.Capability("ns"), &corev1.Namespace{}).IsCreated().Named("namespaces").Require("true", "no")
			vigil.When(m.Capability("hooks"), &corev1.Pod{}).IsCreated().Named("no-privileged").Validate(testkit.DenyPrivileged)
		}, []string{"gate namespace-team waits for the Namespace named team in namespace team, but Namespaces are cluster-scoped", "drop InNamespace"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := vigil.NewModule("wide", vigil.Options{})
			vigil.WaitFor(m, &corev1.Pod{}).WithName("seed").ToBeCreated(nil)
			tc.declare(m)
			err := m.Verify()
			if err == nil {
				t.Fatal("Verify() = nil, want the gate's mistake")
			}
			for _, w := range append(tc.want, "exclusion_test.go:", "gate pod-seed waits for the Pod named seed in every namespace",
				"would exempt every Pod named seed in every namespace", "add .InNamespace(namespace) to the gate") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Verify() = %q, want it to contain %q", err, w)
				}
			}
			for _, cmd := range []string{"plan", "manifests"} {
				if code := vigil.Execute(t.Context(), m, []string{cmd}); code != cmdutil.ExitFailed {
					t.Errorf("%s exited %d, want %d", cmd, code, cmdutil.ExitFailed)
				}
			}
		})
	}
	// Not a mistake: in one namespace; a cluster-scoped kind; a kind nothing
	// of the module governs.
	m := vigil.NewModule("narrow", vigil.Options{})
	vigil.WaitFor(m, &corev1.Pod{}).WithName("seed").InNamespace("infra").ToBeCreated(nil)
	vigil.WaitFor(m, &corev1.Namespace{}).WithName("infra").ToBeCreated(nil)
	vigil.WaitFor(m, &corev1.ConfigMap{}).WithName("settings").ToBeCreated(nil)
	hooks := m.Capability("hooks")
	vigil.When(hooks, &corev1.Pod{}).IsCreated().Named("no-privileged").Validate(testkit.DenyPrivileged)
	vigil.When(hooks, &corev1.Namespace{}).IsCreated().Named("namespaces").Validate(func(context.Context, *vigil.Request[*corev1.Namespace]) vigil.Verdict { return admission.Allow() })
	if err := m.Verify(); err != nil {
		t.Errorf("Verify() = %v, want nil", err)
	}
	code, plan := testkit.RunCapture(t, m, "plan")
	for _, want := range []string{"Pod seed in namespace infra: gate pod-seed", "Namespace infra (cluster-scoped): gate namespace-infra"} {
		if code != 0 || !strings.Contains(plan, want) {
			t.Errorf("plan (exit %d) lacks %q:\n%s", code, want, plan)
		}
	}
	if strings.Contains(plan, "gate configmap-settings (exclusion_test.go:") {
		t.Errorf("plan lists the ConfigMap waited for in every namespace as excluded, want no exclusion for it:\n%s", plan)
	}
}

// A kind the definition cannot place (a CRD's) is excluded by name only
// outside every namespace: as a tenant who may create Widgets in her own
// namespace, a privileged Widget named after the one a gate waits for by
// name is refused by the check the manifests ship; and the admission role,
// which asks the API server, refuses to register the webhooks of a module
// whose gate waits by name in every namespace for a namespaced kind they
// govern, naming the gate's call site and what to do.
func TestGateByNameOnANamespacedCRDKind(t *testing.T) {
	ctx := t.Context()
	home, mine := env.Namespace(t), env.Namespace(t)
	suffix := home[len(home)-6:]
	name := "crdexcl-" + suffix
	group := "w" + suffix + ".excl.vigil.dev"
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptrTo(true),
				}},
			}},
		},
	}
	if err := env.Client.Create(ctx, crd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), crd) })
	vigiltest.Eventually(t, 30*time.Second, vigiltest.Get(env.Client, crd, func(c *apiextensionsv1.CustomResourceDefinition) error {
		for _, cond := range c.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("CRD %s not established", c.Name)
	}))
	bootstrapConfigs(t, name)
	deleteChecks(t, name, [2]string{"widgets", "no-privileged"})

	m := vigil.NewModule(name, vigil.Options{Namespace: home})
	vigil.WaitFor(m, vigil.Kind(group, "v1", "Widget")).WithName("seed").Named("seed").ToBeCreated(nil)
	widgets := m.Capability("widgets")
	vigil.When(widgets, vigil.Kind(group, "v1", "Widget")).IsCreated().Named("no-privileged").
		Require(`!has(object.spec) || !has(object.spec.privileged) || !object.spec.privileged`, "privileged widgets are refused by the check")
	vigil.When(widgets, vigil.Kind(group, "v1", "Widget")).IsCreated().Named("watch").
		Validate(func(context.Context, *vigil.Request[*unstructured.Unstructured]) vigil.Verdict {
			return admission.Allow()
		})
	if err := m.Verify(); err != nil {
		t.Fatalf("Verify() = %v: the definition cannot tell a Widget's scope, want no mistake yet", err)
	}
	code, plan := testkit.RunCapture(t, m, "plan")
	if code != 0 || !strings.Contains(plan, "Widget seed (cluster-scoped; the admission role refuses to register if Widget is a namespaced kind its webhooks or checks govern): gate seed (exclusion_test.go:") {
		t.Errorf("plan (exit %d) does not list the Widget as excluded only when cluster-scoped:\n%s", code, plan)
	}

	// The check, as the manifests ship it.
	var policies []*unstructured.Unstructured
	for _, o := range testkit.RenderManifests(t, m) {
		if strings.HasPrefix(o.GetKind(), "ValidatingAdmissionPolicy") {
			policies = append(policies, o)
		}
	}
	applyObjects(t, policies, false)
	mallory := tenant(t, name+"-mallory", group, "widgets", mine)
	widget := func(ns, name string) *unstructured.Unstructured {
		w := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"privileged": true}}}
		w.SetAPIVersion(group + "/v1")
		w.SetKind("Widget")
		w.SetNamespace(ns)
		w.SetName(name)
		return w
	}
	byCheck := func(err error) bool {
		return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "privileged widgets are refused by the check")
	}
	testkit.Until(t, 30*time.Second, "the check refuses mallory a privileged Widget", func(i int) error {
		return mallory.Create(ctx, widget(mine, fmt.Sprint("probe-", i)), client.DryRunAll)
	}, byCheck)
	if err := mallory.Create(ctx, widget(mine, "seed")); !byCheck(err) {
		t.Errorf("mallory's privileged Widget seed in %s: err = %v, want refused by the check", mine, err)
	}

	// The admission role asks the API server, and refuses.
	_, certDir := testkit.ServingDir(t)
	addr := vigiltest.FreeAddr(t)
	t.Setenv(modcli.EnvHandoffDir, t.TempDir())
	runCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var exit int
	stderr := captureStderr(t, func() {
		exit = vigil.Execute(runCtx, m, []string{"admission", "--addr", addr, "--metrics-addr", vigiltest.FreeAddr(t),
			"--cert-dir", certDir, "--kubeconfig", kubeconfig(t), "--shutdown-delay", "0s", "--webhook-url", "https://" + addr, "--bootstrap"})
	})
	if runCtx.Err() != nil {
		t.Fatalf("the admission role ran for 60s with webhooks excluding every Widget named seed in every namespace, want it to refuse to register (exit %d):\n%s", exit, stderr)
	}
	for _, want := range []string{"exclusion_test.go:", "gate seed waits for the Widget named seed in every namespace", "webhook widgets/watch", "add .InNamespace(namespace) to the gate"} {
		if exit == 0 || !strings.Contains(stderr, want) {
			t.Errorf("admission exited %d, want non-zero with %q:\n%s", exit, want, stderr)
		}
	}
}

func ptrTo[T any](v T) *T { return &v }

// captureStderr is what fn writes to os.Stderr.
func captureStderr(t *testing.T, fn func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan string)
	go func() {
		data, _ := io.ReadAll(r)
		done <- string(data)
	}()
	saved := os.Stderr
	os.Stderr = w
	fn()
	os.Stderr = saved
	w.Close()
	return <-done
}
