package admission

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/internal/commands/cmdutil"
	"github.com/vigilkit/vigil/internal/testsupport/testkit"
	"github.com/vigilkit/vigil/vigiltest"
)

// A capability's Require is checked by the API server itself, from the
// policies the module's manifests ship, with no module running: as a user who
// may only create and change ConfigMaps, a ConfigMap without an app label is
// refused in the capability's namespace, on create and on update; it passes
// elsewhere, in a namespace opted out, and the object a startup gate waits
// for passes; a capability in Warn mode answers with a warning.
func TestRequireIsCheckedByTheAPIServer(t *testing.T) {
	ctx := t.Context()
	home, apps, loose, other := env.Namespace(t), env.Namespace(t), env.Namespace(t), env.Namespace(t)
	name := "require-" + home[len(home)-6:]
	optedOut := name + "-skipped"
	user := name + "-mallory"

	m := vigil.NewModule(name, vigil.Options{Namespace: home})
	vigil.WaitFor(m, &corev1.ConfigMap{}).WithName("seed").InNamespace(apps).ToBeCreated(nil)
	const skip = "require.example.dev/skip"
	labels := m.Capability("labels", vigil.InNamespaces(apps, optedOut), vigil.OptOutLabel(skip, "group:system:masters"))
	vigil.When(labels, &corev1.ConfigMap{}).IsCreatedOrUpdated().Named("need-app").
		Require(`has(object.metadata.labels) && 'app' in object.metadata.labels`, "a ConfigMap needs an app label: add one, as in app: my-service")
	warned := m.Capability("teams", vigil.InNamespaces(loose), vigil.Mode(vigil.ModeWarn))
	vigil.When(warned, &corev1.ConfigMap{}).IsCreated().Named("need-team").
		Require(`has(object.metadata.labels) && 'team' in object.metadata.labels`, "a ConfigMap needs a team label")

	code, plan := testkit.RunCapture(t, m, "plan")
	if code != 0 || !strings.Contains(plan, "need-app require ConfigMap CREATE,UPDATE (require_test.go:") ||
		!strings.Contains(plan, "checked by the API server itself (ValidatingAdmissionPolicy "+name+"-labels-need-app)") {
		t.Errorf("plan (exit %d) does not show the check, where it was declared and its policy:\n%s", code, plan)
	}

	var policies []*unstructured.Unstructured
	for _, o := range testkit.RenderManifests(t, m) {
		if strings.HasPrefix(o.GetKind(), "ValidatingAdmissionPolicy") && o.GetName() != name+"-rolebindings" { // the roles' own RoleBindings' guard
			policies = append(policies, o)
		}
	}
	if len(policies) != 6 {
		t.Fatalf("the manifests ship %d ValidatingAdmissionPolicies and bindings, want 6: a policy and a binding per check, and the opt-out label's guard", len(policies))
	}
	applyObjects(t, policies, false)
	t.Cleanup(func() {
		for _, o := range policies {
			_ = env.Client.Delete(context.Background(), o)
		}
	})

	cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create", "get", "update", "patch"},
	}}}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: cr.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	for _, o := range []client.Object{cr, crb} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
	seen := &warnings{}
	cfg := env.AsUserConfig(user)
	cfg.WarningHandler = seen
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	cm := func(ns, name string, labels map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}}
	}
	refused := func(err error) bool {
		return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "a ConfigMap needs an app label: add one, as in app: my-service")
	}
	// In force once the API server's policy informer has it, and RBAC.
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		err := c.Create(ctx, cm(apps, fmt.Sprint("probe-", i), nil), client.DryRunAll)
		if refused(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a ConfigMap without an app label was never refused: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	if err := c.Create(ctx, cm(apps, "bare", nil)); !refused(err) {
		t.Errorf("create without an app label in %s: err = %v, want refused by the check", apps, err)
	}
	labelled := cm(apps, "labelled", map[string]string{"app": "web"})
	if err := c.Create(ctx, labelled); err != nil {
		t.Fatalf("create with an app label: %v", err)
	}
	labelled.Labels = map[string]string{"tier": "web"}
	if err := c.Update(ctx, labelled); !refused(err) {
		t.Errorf("update that removes the app label: err = %v, want refused by the check", err)
	}
	if err := c.Create(ctx, cm(apps, "seed", nil)); err != nil {
		t.Errorf("the ConfigMap a startup gate waits for, without an app label: %v, want it to pass: the check must never stand in the module's own way", err)
	}
	if err := c.Create(ctx, cm(other, "bare", nil)); err != nil {
		t.Errorf("outside the capability's namespaces: %v, want it to pass", err)
	}
	// A namespace opted out by whom the capability allows (an admin, in
	// system:masters) is out of its checks too.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: optedOut, Labels: map[string]string{skip: "true"}}}
	if err := env.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ns) })
	if err := c.Create(ctx, cm(optedOut, "bare", nil)); err != nil {
		t.Errorf("in a namespace opted out of the capability: %v, want it to pass", err)
	}
	// The Warn capability's check is a policy of its own, which the API
	// server loads in its own time: dry runs until it warns, within 10 s.
	vigiltest.Eventually(t, 10*time.Second, func() error {
		if err := c.Create(ctx, cm(loose, "no-team", nil), client.DryRunAll); err != nil {
			t.Fatalf("in the Warn capability's namespace: %v, want it to pass with a warning", err)
		}
		if !strings.Contains(seen.String(), "a ConfigMap needs a team label") {
			return fmt.Errorf("warnings %q: want the Warn capability's check as a warning", seen)
		}
		return nil
	})
	if err := c.Create(ctx, cm(loose, "no-team", nil)); err != nil {
		t.Fatalf("in the Warn capability's namespace: %v, want it to pass with a warning", err)
	}
}

// A check's mistakes are the definition's, with the call site.
func TestRequireMistakes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		declare func(m *vigil.Module, c *vigil.Capability)
		want    string
	}{
		{"no operation", func(m *vigil.Module, c *vigil.Capability) {
			vigil.When(c, &corev1.ConfigMap{}).Require(`true`, "never")
		}, "no operation"},
		// A check after a filter does not compile: see
		// TestInvalidDeclarationsDoNotCompile.
		{"not CEL", func(m *vigil.Module, c *vigil.Capability) {
			vigil.When(c, &corev1.ConfigMap{}).IsCreated().Require(`object.metadata.labels[`, "never")
		}, "expected a CEL expression"},
		{"no message", func(m *vigil.Module, c *vigil.Capability) {
			vigil.When(c, &corev1.ConfigMap{}).IsCreated().Require(`true`, "")
		}, "expected the denial, one line"},
		{"a name taken", func(m *vigil.Module, c *vigil.Capability) {
			vigil.When(c, &corev1.ConfigMap{}).IsCreated().Named("x").Require(`true`, "never")
			vigil.When(c, &corev1.ConfigMap{}).IsCreated().Named("x").Require(`false`, "never")
		}, `check "x" of capability "labels": the name is already declared at`},
		{"the guard's name", func(m *vigil.Module, c *vigil.Capability) {
			vigil.When(c, &corev1.ConfigMap{}).IsCreated().Named("opt-out").Require(`true`, "never")
		}, "its ValidatingAdmissionPolicy would be named mod-labels-opt-out, as is the one declared at"},
		{"another capability's name", func(m *vigil.Module, c *vigil.Capability) {
			vigil.When(c, &corev1.ConfigMap{}).IsCreated().Named("a-b").Require(`true`, "never")
			vigil.When(m.Capability("labels-a"), &corev1.ConfigMap{}).IsCreated().Named("b").Require(`true`, "never")
		}, "its ValidatingAdmissionPolicy would be named mod-labels-a-b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := vigil.NewModule("mod", vigil.Options{})
			tc.declare(m, m.Capability("labels", vigil.OptOutLabel("require.example.dev/skip", "alice")))
			err := m.Verify()
			if err == nil {
				t.Fatal("Verify() = nil, want the mistake")
			}
			for _, w := range []string{"require_test.go:", tc.want} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Verify() = %q, want it to contain %q", err, w)
				}
			}
			if code := vigil.Execute(t.Context(), m, []string{"plan"}); code != cmdutil.ExitFailed {
				t.Errorf("plan exited %d, want %d", code, cmdutil.ExitFailed)
			}
		})
	}
}

// A Require on a Pod's UPDATE holds on pods/status too, through which the
// API server lets labels and annotations change: as a user who may create
// Pods and update their status, removing the app label there is refused by
// the API server's own policy, while a status write that leaves the
// metadata as it was (the kubelet's) passes.
func TestRequireHoldsOnStatusWrites(t *testing.T) {
	ctx := t.Context()
	home, apps := env.Namespace(t), env.Namespace(t)
	name := "require-status-" + home[len(home)-6:]
	user := name + "-mallory"

	m := vigil.NewModule(name, vigil.Options{Namespace: home})
	labels := m.Capability("labels", vigil.InNamespaces(apps))
	vigil.When(labels, &corev1.Pod{}).IsCreatedOrUpdated().Named("need-app").
		Require(`has(object.metadata.labels) && 'app' in object.metadata.labels`, "a Pod needs an app label")
	code, plan := testkit.RunCapture(t, m, "plan")
	if code != 0 || !strings.Contains(plan, "need-app require Pod CREATE,UPDATE (and pods/status writes that change labels or annotations)") {
		t.Errorf("plan (exit %d) does not say the check holds on pods/status:\n%s", code, plan)
	}
	var policies []*unstructured.Unstructured
	for _, o := range testkit.RenderManifests(t, m) {
		if strings.HasPrefix(o.GetKind(), "ValidatingAdmissionPolicy") {
			policies = append(policies, o)
		}
	}
	applyObjects(t, policies, false)
	t.Cleanup(func() {
		for _, o := range policies {
			_ = env.Client.Delete(context.Background(), o)
		}
	})
	c := env.AsTenant(t, apps, user, rbacv1.PolicyRule{
		APIGroups: []string{""}, Resources: []string{"pods", "pods/status"}, Verbs: []string{"create", "get", "update", "patch"}})
	refused := func(err error) bool {
		return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "a Pod needs an app label")
	}
	pod := func(name string, labels map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: name, Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "127.0.0.1/fake"}}}}
	}
	vigiltest.Eventually(t, 30*time.Second, func() error {
		if err := c.Create(ctx, pod("probe", nil), client.DryRunAll); !refused(err) {
			return fmt.Errorf("a Pod without an app label: %v, want refused by the check", err)
		}
		return nil
	})
	p := pod("web", map[string]string{"app": "web"})
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	p.Status.Message = "pending"
	if err := c.Status().Update(ctx, p); err != nil {
		t.Fatalf("a status write that leaves the labels as they were: %v, want it to pass", err)
	}
	p.Labels = map[string]string{"tier": "web"}
	if err := c.Status().Update(ctx, p); !refused(err) {
		t.Errorf("removing the app label through pods/status: %v, want refused by the check", err)
	}
}

// A Require that uses a CEL library newer than the oldest release the module
// targets is a definition mistake, at its call site, naming the release and
// the library it needs; the API server running refuses or accepts each
// library's expression as vigil says its release does. An API server accepts
// a library in a new policy one release after the one that added it.
func TestRequireIsCompiledForTheOldestRelease(t *testing.T) {
	const expr = `object.metadata.?labels.orValue({}).map(k, k).sortBy(k, k).size() >= 0`
	m := vigil.NewModule("mod", vigil.Options{})
	vigil.When(m.Capability("labels"), &corev1.ConfigMap{}).IsCreated().Require(expr, "never")
	err := m.Verify()
	if err == nil {
		t.Fatal("Verify() = nil, want the expression refused for Kubernetes 1.33")
	}
	const refusal = "undeclared reference to 'sortBy'"
	for _, w := range []string{"require_test.go:", "needs Kubernetes 1.35", "lists extension", "the module targets 1.33", refusal} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Verify() = %q, want it to contain %q", err, w)
		}
	}
	for target, ok := range map[string]bool{"1.34": false, "1.35": true} {
		newer := vigil.NewModule("mod", vigil.Options{MinKubernetes: target})
		vigil.When(newer.Capability("labels"), &corev1.ConfigMap{}).IsCreated().Require(expr, "never")
		if err := newer.Verify(); (err == nil) != ok {
			t.Errorf("MinKubernetes %s: Verify() = %v, want accepted %t", target, err, ok)
		}
	}

	// The API server running decides as vigil says its release does.
	minor, _ := strconv.Atoi(strings.TrimPrefix(env.KubernetesVersion, "1."))
	for i, lib := range []struct {
		expr     string
		accepted int // the first release that accepts it in a new policy
	}{
		{`object.metadata.?labels.orValue({}).all(k, v, v != "")`, 33},
		{`isSemver(object.metadata.?labels["version"].orValue("1.0.0"))`, 34},
		{expr, 35},
		{`[1, 2].includes(1)`, 38},
	} {
		err := env.Client.Create(t.Context(), celPolicy(fmt.Sprintf("lib-%d", i), lib.expr), client.DryRunAll)
		switch want := minor >= lib.accepted; {
		case want && err != nil:
			t.Errorf("Kubernetes %s: a policy with %s: %v, want it accepted (from 1.%d)", env.KubernetesVersion, lib.expr, err, lib.accepted)
		case !want && (err == nil || !strings.Contains(err.Error(), "undeclared reference")):
			t.Errorf("Kubernetes %s: a policy with %s: %v, want it refused with an undeclared reference (accepted from 1.%d)", env.KubernetesVersion, lib.expr, err, lib.accepted)
		}
	}
}

// celPolicy is a ValidatingAdmissionPolicy on ConfigMap creates with one
// validation.
func celPolicy(name, expr string) *admissionregistrationv1.ValidatingAdmissionPolicy {
	return &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: expr}},
		},
	}
}
