package policytest_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/vigiltest"
)

func teams() *vigil.Module {
	m := vigil.NewModule("teams", vigil.Options{})
	c := m.Capability("teams")
	teamsOf := vigil.NewLister(m, &corev1.Namespace{})
	vigil.When(c, &corev1.Pod{}).IsCreated().Named("team-label").
		Mutate(func(ctx context.Context, r *vigil.Request[*corev1.Pod]) error {
			ns, err := teamsOf.Get(ctx, "", r.Namespace)
			if err != nil {
				return nil
			}
			r.SetLabel("team", ns.Labels["team"])
			return nil
		})
	vigil.When(c, &corev1.Pod{}).IsCreated().Named("needs-team").
		Validate(func(_ context.Context, r *vigil.Request[*corev1.Pod]) vigil.Verdict {
			if r.Object.Labels["team"] == "" {
				return admission.Deny("Pod " + r.Name + " has no team: label its namespace with team")
			}
			return admission.Allow()
		})
	return m
}

// vigiltest.Review runs a module's webhooks on Go objects, no control
// plane: the mutation reads its lister, the validation sees the patched
// object.
func TestReviewRunsTheModuleInProcess(t *testing.T) {
	m := teams()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"}}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{"team": "retail"}}}

	a := vigiltest.Review(t, m, vigiltest.Request{Object: pod, Objects: []client.Object{ns}})
	if !a.Allowed || !a.Patch.HasLabel("team", "retail") || a.Object.GetLabels()["team"] != "retail" {
		t.Fatalf("answer %+v; want allowed with the label team=retail", a)
	}
	a = vigiltest.Review(t, m, vigiltest.Request{Object: pod})
	if a.Allowed || !strings.Contains(a.Message, "Pod web has no team") || a.Webhook != "teams.validate.teams.vigil.dev" {
		t.Fatalf("answer %+v; want denied by teams.validate.teams.vigil.dev, naming the Pod", a)
	}

	// A whole AdmissionReview's request, as the API server sends it.
	pod.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	req := &admissionv1.AdmissionRequest{
		UID: "1", Operation: admissionv1.Create, Namespace: "shop", Name: "web",
		Kind:     metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		Object:   runtime.RawExtension{Raw: raw},
	}
	if a := vigiltest.ReviewRequest(t, m, req, []client.Object{ns}, nil); !a.Allowed || !a.Patch.HasLabel("team", "retail") {
		t.Fatalf("ReviewRequest: %+v; want allowed with the label", a)
	}
}

// vigiltest.Cases runs a folder of case files, a subtest each.
func TestCasesRunAFolderAsSubtests(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "pods.yaml"), []byte(`
name: a team's pod
object: {apiVersion: v1, kind: Pod, metadata: {name: web, namespace: shop}}
objects: [{apiVersion: v1, kind: Namespace, metadata: {name: shop, labels: {team: retail}}}]
expect: {allowed: true, patch: [{op: add, path: /metadata/labels, value: {team: retail}}]}
---
name: no team
object: {apiVersion: v1, kind: Pod, metadata: {name: web, namespace: shop}}
expect: {allowed: false, message: "has no team"}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	vigiltest.Cases(t, teams(), dir)
}

// `<module> test DIR` exits 0 when every case passes and 1 otherwise, and
// --junit writes each case's outcome.
func TestTheTestCommandExitsAndWritesJUnit(t *testing.T) {
	dir := t.TempDir()
	write := func(body string) {
		if err := os.WriteFile(filepath.Join(dir, "pods.yaml"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	junit := filepath.Join(t.TempDir(), "report.xml")
	write("name: no team\nobject: {apiVersion: v1, kind: Pod, metadata: {name: web, namespace: shop}}\nexpect: {allowed: false, message: has no team}\n")
	if code := vigil.Execute(t.Context(), teams(), []string{"test", dir, "--junit", junit}); code != 0 {
		t.Fatalf("a passing case: exit %d, want 0", code)
	}
	write("name: no team\nobject: {apiVersion: v1, kind: Pod, metadata: {name: web, namespace: shop}}\nexpect: {allowed: true}\n")
	if code := vigil.Execute(t.Context(), teams(), []string{"test", dir, "--junit", junit}); code != 1 {
		t.Fatalf("a failing case: exit %d, want 1", code)
	}
	report, err := os.ReadFile(junit)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`<testsuites tests="1" failures="1" errors="0">`, `<testcase name="no team"`, `<failure message="expected allowed, got denied by teams.validate.teams.vigil.dev`} {
		if !strings.Contains(string(report), want) {
			t.Errorf("JUnit report lacks %q:\n%s", want, report)
		}
	}
}

// The in-process Store refuses the keys the real one does, so a handler
// that passes in a case does not fail in the cluster.
func TestTheInProcessStoreRefusesWhatTheStoreRefuses(t *testing.T) {
	m := vigil.NewModule("keys", vigil.Options{})
	c := m.Capability("keys")
	vigil.When(c, &corev1.Secret{}).IsCreated().Named("records").
		Validate(func(ctx context.Context, r *vigil.Request[*corev1.Secret]) vigil.Verdict {
			if err := vigil.StoreFrom(ctx).Set(ctx, r.Name, "seen"); err != nil {
				return admission.Deny(err.Error())
			}
			return admission.Allow()
		})
	for name, want := range map[string]string{"ok.key-1": "", "bad:key": "invalid store key"} {
		a := vigiltest.Review(t, m, vigiltest.Request{Object: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "apps"}}})
		if (want == "") != a.Allowed || !strings.Contains(a.Message, want) {
			t.Errorf("a Secret named %s: %+v; want %q", name, a, want)
		}
	}
}
