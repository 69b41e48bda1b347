package audit_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/definition/define"
	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/serving/admit"
	"github.com/vigilkit/vigil/internal/serving/audit"
	"github.com/vigilkit/vigil/internal/shipping/manifests"
	"github.com/vigilkit/vigil/vigiltest"
)

// applyRBAC creates the RBAC the module's manifests ship (its Roles,
// ClusterRoles and their bindings), removed after the test.
func applyRBAC(t *testing.T, m *spec.Module) {
	t.Helper()
	objs, err := manifests.Render(m, manifests.Options{Image: "example.com/" + m.Name + ":1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		switch o.(type) {
		case *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding, *rbacv1.Role, *rbacv1.RoleBinding:
		default:
			continue
		}
		if err := env.Client.Create(t.Context(), o); err != nil {
			t.Fatalf("apply %T %s: %v", o, o.GetName(), err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
}

// forbiddenLog is a logger that keeps every line that says Forbidden.
type forbiddenLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *forbiddenLog) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		if strings.Contains(strings.ToLower(args), "forbidden") {
			l.mu.Lock()
			l.lines = append(l.lines, args)
			l.mu.Unlock()
		}
	}, funcr.Options{Verbosity: 1})
}

func (l *forbiddenLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.lines
	l.lines = nil
	return out
}

// The watcher, as its ServiceAccount with the RBAC its manifests ship,
// writes, rewrites and removes its own PolicyReport, vigil-<module>, and
// meets no Forbidden; another tool's PolicyReport in the same namespace it
// can neither read, rewrite nor delete, and it cannot list every report.
func TestWatcherWritesOnlyItsOwnPolicyReport(t *testing.T) {
	ctx := t.Context()
	crds, err := os.ReadFile("testdata/policyreport-crds.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := env.InstallCRDYAML(crds); err != nil {
		t.Fatal(err)
	}
	ns := env.Namespace(t)
	name := "reports-" + ns[len(ns)-6:]
	label := "bad-" + ns[len(ns)-6:]
	// Cluster-wide, as the issue found it: the reports may be in any
	// namespace, so the rule on them is a ClusterRole's.
	b := define.ValidateBinding(corev1.SchemeGroupVersion.WithKind("ConfigMap"), &corev1.ConfigMap{},
		func(_ context.Context, req *admission.Request[*corev1.ConfigMap]) admission.Verdict {
			if req.HasLabel(label) {
				return admission.Deny("label " + label + " is not allowed")
			}
			return admission.Allow()
		})
	b.Capability, b.Name = "reports", "no-bad"
	bindings := []spec.Binding{b}
	m := &spec.Module{Name: name, Namespace: ns, Version: "1.0.0", Bindings: bindings}
	applyRBAC(t, m)

	other := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": spec.PolicyReports.GroupVersion().String(), "kind": "PolicyReport",
		"metadata": map[string]any{"name": "kyverno-pol-xyz", "namespace": ns, "labels": map[string]any{"app.kubernetes.io/managed-by": "kyverno"}},
		"summary":  map[string]any{"pass": int64(3), "fail": int64(0)},
		"results":  []any{},
	}}
	admin := dynamic.NewForConfigOrDie(env.Config)
	reports := admin.Resource(spec.PolicyReports).Namespace(ns)
	if _, err := reports.Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bad := func(n string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n, Labels: map[string]string{label: "yes"}}}
	}
	if err := env.Client.Create(ctx, bad("bad-1")); err != nil {
		t.Fatal(err)
	}

	saConfig := env.AsServiceAccountConfig(ns, manifests.ServiceAccount(name, manifests.Watcher))
	log := &forbiddenLog{}
	a := &audit.Auditor{Module: m, Handler: admit.NewHandler(bindings, admit.Options{Module: name, Timeout: 5 * time.Second}),
		Config: saConfig, Log: log.logger()}
	own := spec.PolicyReportName(name)
	// failures reads the module's report as the admin; -1 when there is none.
	failures := func() (int64, error) {
		r, err := reports.Get(ctx, own, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return -1, nil
		}
		if err != nil {
			return 0, err
		}
		fail, _, _ := unstructuredInt(r.Object, "summary", "fail")
		return fail, nil
	}
	// run audits as the watcher until its report says want failures (-1:
	// no report): the API server's RBAC cache takes the new roles in
	// within a few milliseconds, hence the window.
	run := func(what string, want int64) {
		t.Helper()
		vigiltest.Eventually(t, 10*time.Second, func() error {
			if _, err := a.Run(ctx); err != nil {
				return fmt.Errorf("%s: the audit as the watcher: %v", what, err)
			}
			if lines := log.take(); len(lines) > 0 {
				return fmt.Errorf("%s: the audit as the watcher met a Forbidden:\n%s", what, strings.Join(lines, "\n"))
			}
			got, err := failures()
			if err != nil {
				return err
			}
			if got != want {
				return fmt.Errorf("%s: the watcher's PolicyReport %s/%s counts %d failures, want %d (-1: none)", what, ns, own, got, want)
			}
			return nil
		})
	}
	run("created", 1)
	if err := env.Client.Create(ctx, bad("bad-2")); err != nil {
		t.Fatal(err)
	}
	run("rewritten", 2)
	for _, n := range []string{"bad-1", "bad-2"} {
		if err := env.Client.Delete(ctx, bad(n)); err != nil {
			t.Fatal(err)
		}
	}
	run("removed once nothing is found", -1)

	// Another tool's report: out of the watcher's reach.
	watcher := dynamic.NewForConfigOrDie(saConfig).Resource(spec.PolicyReports)
	forged := other.DeepCopy()
	forged.Object["summary"] = map[string]any{"pass": int64(0), "fail": int64(99)}
	for what, try := range map[string]func() error{
		"get": func() error {
			_, err := watcher.Namespace(ns).Get(ctx, "kyverno-pol-xyz", metav1.GetOptions{})
			return err
		},
		"update": func() error {
			have, err := reports.Get(ctx, "kyverno-pol-xyz", metav1.GetOptions{})
			if err != nil {
				return err
			}
			forged.SetResourceVersion(have.GetResourceVersion())
			_, err = watcher.Namespace(ns).Update(ctx, forged, metav1.UpdateOptions{})
			return err
		},
		"patch": func() error {
			_, err := watcher.Namespace(ns).Patch(ctx, "kyverno-pol-xyz", types.MergePatchType, []byte(`{"summary":{"fail":99}}`), metav1.PatchOptions{})
			return err
		},
		"delete": func() error { return watcher.Namespace(ns).Delete(ctx, "kyverno-pol-xyz", metav1.DeleteOptions{}) },
		"list every namespace's": func() error {
			_, err := watcher.List(ctx, metav1.ListOptions{})
			return err
		},
		"list the namespace's": func() error {
			_, err := watcher.Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=kyverno"})
			return err
		},
	} {
		if err := try(); !apierrors.IsForbidden(err) {
			t.Errorf("the watcher's %s of another tool's PolicyReport %s/kyverno-pol-xyz: %v; want Forbidden", what, ns, err)
		}
	}
	have, err := reports.Get(ctx, "kyverno-pol-xyz", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("another tool's PolicyReport after the watcher's attempts: %v; want it kept", err)
	}
	if fail, _, _ := unstructuredInt(have.Object, "summary", "fail"); fail != 0 {
		t.Errorf("another tool's PolicyReport was rewritten by the watcher: summary.fail %d, want 0", fail)
	}
}
