package dev

import (
	"context"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/internal/definition/define"
)

// A request the module's mutating webhook allowed but one of its checks —
// which the API server evaluates after the mutating webhooks — refuses is
// shown refused, not admitted; the check sees the object as patched, and
// its namespace's labels (here, an opt-out).
func TestTimelineShowsARequestTheChecksRefused(t *testing.T) {
	m := vigil.NewModule("m", vigil.Options{})
	c := m.Capability("c", vigil.OptOutLabel("m.dev/skip", "alice"))
	vigil.When(c, &corev1.ConfigMap{}).IsCreated().Named("label").
		Mutate(func(context.Context, *vigil.Request[*corev1.ConfigMap]) error { return nil })
	vigil.When(c, &corev1.ConfigMap{}).IsCreated().Named("needs-app").
		Require(`has(object.metadata.labels) && 'app' in object.metadata.labels`, "the ConfigMap has no app label")
	plan, mistakes, ok := define.Resolved(m)
	if !ok || mistakes != nil {
		t.Fatal(mistakes)
	}
	skipped := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "skipped", Labels: map[string]string{"m.dev/skip": "true"}}}
	s := &Session{plan: plan, cs: fake.NewClientset(skipped)}
	req := func(ns string) *admissionv1.AdmissionRequest {
		return &admissionv1.AdmissionRequest{
			Operation: admissionv1.Create, Namespace: ns, Name: "settings",
			Kind:     metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: "configmaps"},
			Object:   runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"settings","namespace":"` + ns + `"}}`)},
		}
	}
	seen := func(ns string, resp *admissionv1.AdmissionResponse) *Review {
		r := review("/mutate/m/c", req(ns), resp)
		s.refusedAfter(t.Context(), r, req(ns), resp)
		return r
	}

	r := seen("apps", &admissionv1.AdmissionResponse{Allowed: true})
	want := "CREATE ConfigMap apps/settings (mutate): allowed by the module's webhook, then refused by the API server's policy m-c-needs-app: " +
		"ValidatingAdmissionPolicy 'm-c-needs-app' with binding 'm-c-needs-app' denied request: the ConfigMap has no app label"
	if r.describe() != want {
		t.Errorf("timeline:\n  %s\nwant\n  %s", r.describe(), want)
	}
	patched := &admissionv1.AdmissionResponse{Allowed: true, Patch: []byte(`[{"op":"add","path":"/metadata/labels","value":{"app":"shop"}}]`)}
	if r := seen("apps", patched); r.RefusedBy != "" || strings.Contains(r.describe(), "refused") {
		t.Errorf("a request the patch makes pass the check: %s", r.describe())
	}
	if r := seen("skipped", &admissionv1.AdmissionResponse{Allowed: true}); r.RefusedBy != "" {
		t.Errorf("a request in a namespace opted out of the capability: %s", r.describe())
	}
}
