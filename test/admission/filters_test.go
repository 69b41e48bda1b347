package admission

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/serving/admit"
	"github.com/vigilkit/vigil/internal/testsupport/testkit"
)

// filteredModule binds one capability's mutations behind each of the
// annotation and terminating filters, one validation to DELETE requests,
// and one mutation that edits annotations through the Request.
func filteredModule(t *testing.T) *vigil.Module {
	t.Helper()
	m := vigil.NewModule("filters", vigil.Options{})
	c := m.Capability("policies")
	if c.Name() != "policies" {
		t.Fatalf("Capability(%q).Name() = %q", "policies", c.Name())
	}
	label := func(key string) func(context.Context, *vigil.Request[*corev1.Pod]) error {
		return func(_ context.Context, r *vigil.Request[*corev1.Pod]) error {
			r.SetLabel(key, "yes")
			return nil
		}
	}
	vigil.When(c, &corev1.Pod{}).IsCreatedOrUpdated().WithAnnotation("team").Named("has-team").Mutate(label("saw-team"))
	vigil.When(c, &corev1.Pod{}).IsCreatedOrUpdated().WithAnnotationValue("team", "shop").Named("team-shop").Mutate(label("saw-shop"))
	vigil.When(c, &corev1.Pod{}).IsUpdated().WhileTerminating().Named("terminating").Mutate(label("saw-terminating"))
	vigil.When(c, &corev1.Pod{}).IsCreated().Named("annotations").Mutate(func(_ context.Context, r *vigil.Request[*corev1.Pod]) error {
		if r.HasAnnotation("drop") {
			r.RemoveAnnotation("drop")
			r.SetAnnotation("dropped", "drop")
		}
		if !r.HasAnnotation("absent") {
			r.RemoveAnnotation("absent") // removing what is not there changes nothing
		}
		return nil
	})
	vigil.When(c, &corev1.Pod{}).IsDeleted().Named("deleted").Validate(func(_ context.Context, r *vigil.Request[*corev1.Pod]) vigil.Verdict {
		return admission.Deny("deleting " + r.Object.Name + " of team " + r.Object.Annotations["team"])
	})
	if err := m.Verify(); err != nil {
		t.Fatal(err)
	}
	return m
}

// admit posts one review of a Pod to the module's handler on path and
// returns the answer.
func admitPod(t *testing.T, h http.Handler, path string, op admissionv1.Operation, obj, old *corev1.Pod) *admissionv1.AdmissionResponse {
	t.Helper()
	req := &admissionv1.AdmissionRequest{
		UID: "uid-1", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"}, Operation: op,
	}
	for _, o := range []struct {
		pod *corev1.Pod
		raw *runtime.RawExtension
	}{{obj, &req.Object}, {old, &req.OldObject}} {
		if o.pod == nil {
			continue
		}
		req.Namespace, req.Name = o.pod.Namespace, o.pod.Name
		data, err := json.Marshal(o.pod)
		if err != nil {
			t.Fatal(err)
		}
		o.raw.Raw = data
	}
	body, err := json.Marshal(&admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: req})
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	out := &admissionv1.AdmissionReview{}
	if err := json.Unmarshal(w.Body.Bytes(), out); err != nil || out.Response == nil {
		t.Fatalf("%s %s: status %d, %s", op, path, w.Code, w.Body)
	}
	return out.Response
}

// patched applies a response's JSON patch to the pod's metadata and returns
// the labels and annotations it leaves.
func patched(t *testing.T, pod *corev1.Pod, resp *admissionv1.AdmissionResponse) (labels, annotations map[string]string) {
	t.Helper()
	if !resp.Allowed {
		t.Fatalf("response %+v: want allowed", resp.Result)
	}
	labels, annotations = map[string]string{}, map[string]string{}
	for k, v := range pod.Labels {
		labels[k] = v
	}
	for k, v := range pod.Annotations {
		annotations[k] = v
	}
	if len(resp.Patch) == 0 {
		return labels, annotations
	}
	var ops []struct {
		Op    string          `json:"op"`
		Path  string          `json:"path"`
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(resp.Patch, &ops); err != nil {
		t.Fatal(err)
	}
	unescape := strings.NewReplacer("~1", "/", "~0", "~")
	for _, op := range ops {
		var target map[string]string
		var key string
		switch {
		case op.Path == "/metadata/labels" || op.Path == "/metadata/annotations":
			m := map[string]string{}
			if op.Op != "remove" {
				if err := json.Unmarshal(op.Value, &m); err != nil {
					t.Fatalf("patch %s: %v", resp.Patch, err)
				}
			}
			if op.Path == "/metadata/labels" {
				labels = m
			} else {
				annotations = m
			}
			continue
		case strings.HasPrefix(op.Path, "/metadata/labels/"):
			target, key = labels, unescape.Replace(strings.TrimPrefix(op.Path, "/metadata/labels/"))
		case strings.HasPrefix(op.Path, "/metadata/annotations/"):
			target, key = annotations, unescape.Replace(strings.TrimPrefix(op.Path, "/metadata/annotations/"))
		default:
			t.Fatalf("patch %s touches %s, which no binding edits", resp.Patch, op.Path)
		}
		if op.Op == "remove" {
			delete(target, key)
			continue
		}
		var v string
		if err := json.Unmarshal(op.Value, &v); err != nil {
			t.Fatalf("patch %s: %v", resp.Patch, err)
		}
		target[key] = v
	}
	return labels, annotations
}

func filterPod(annotations map[string]string, terminating bool) *corev1.Pod {
	p := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web", Labels: map[string]string{"app": "web"}, Annotations: annotations},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
	}
	if terminating {
		now := metav1.Now()
		p.DeletionTimestamp = &now
		p.Finalizers = []string{"example.com/hold"}
	}
	return p
}

// WithAnnotation, WithAnnotationValue and WhileTerminating run a binding
// only for the objects they describe, as the admission role answers them.
func TestAnnotationAndTerminatingFiltersSelectAsDocumented(t *testing.T) {
	h := testkit.AdmissionHandler(t, filteredModule(t))
	path := admit.MutatePath("filters")
	for _, tc := range []struct {
		name        string
		op          admissionv1.Operation
		annotations map[string]string
		terminating bool
		want        []string // the labels the bindings set
	}{
		{"no annotation", admissionv1.Create, nil, false, nil},
		{"another annotation", admissionv1.Create, map[string]string{"owner": "shop"}, false, nil},
		{"annotation of another value", admissionv1.Create, map[string]string{"team": "ops"}, false, []string{"saw-team"}},
		{"annotation of the value", admissionv1.Update, map[string]string{"team": "shop"}, false, []string{"saw-team", "saw-shop"}},
		{"empty value is not the value", admissionv1.Create, map[string]string{"team": ""}, false, []string{"saw-team"}},
		{"update of a live object", admissionv1.Update, nil, false, nil},
		{"update of a terminating object", admissionv1.Update, nil, true, []string{"saw-terminating"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := filterPod(tc.annotations, tc.terminating)
			var old *corev1.Pod
			if tc.op == admissionv1.Update {
				old = filterPod(tc.annotations, false)
			}
			labels, _ := patched(t, pod, admitPod(t, h, path, tc.op, pod, old))
			want := map[string]string{"app": "web"}
			for _, k := range tc.want {
				want[k] = "yes"
			}
			if len(labels) != len(want) {
				t.Errorf("labels %v, want %v", labels, want)
			}
			for k, v := range want {
				if labels[k] != v {
					t.Errorf("labels %v, want %v", labels, want)
				}
			}
		})
	}
}

// HasAnnotation and RemoveAnnotation read and edit the object; the edit
// reaches the API server as the response's patch.
func TestRequestAnnotationEditsMakeThePatch(t *testing.T) {
	h := testkit.AdmissionHandler(t, filteredModule(t))
	path := admit.MutatePath("filters")

	pod := filterPod(map[string]string{"drop": "x", "keep": "y"}, false)
	_, annotations := patched(t, pod, admitPod(t, h, path, admissionv1.Create, pod, nil))
	if _, ok := annotations["drop"]; ok || annotations["keep"] != "y" || annotations["dropped"] != "drop" || len(annotations) != 2 {
		t.Errorf("annotations after the patch %v, want drop removed, keep kept and dropped set", annotations)
	}

	pod = filterPod(map[string]string{"keep": "y"}, false)
	resp := admitPod(t, h, path, admissionv1.Create, pod, nil)
	if !resp.Allowed || len(resp.Patch) != 0 {
		t.Errorf("without the annotation: allowed %v, patch %s; want allowed with no patch (RemoveAnnotation of an absent key changes nothing)", resp.Allowed, resp.Patch)
	}
}

// A binding with IsDeleted sees DELETE requests, with the object being
// deleted as its Object, and no others.
func TestIsDeletedSeesTheObjectBeingDeleted(t *testing.T) {
	h := testkit.AdmissionHandler(t, filteredModule(t))
	path := admit.ValidatePath("filters")

	pod := filterPod(map[string]string{"team": "shop"}, false)
	resp := admitPod(t, h, path, admissionv1.Delete, nil, pod)
	if resp.Allowed || resp.Result == nil || !strings.Contains(resp.Result.Message, "deleting web of team shop") {
		t.Fatalf("DELETE: %+v, want denied by the binding, which saw the deleted object", resp.Result)
	}
	for _, op := range []admissionv1.Operation{admissionv1.Create, admissionv1.Update} {
		var old *corev1.Pod
		if op == admissionv1.Update {
			old = pod
		}
		// The module's webhooks send only DELETE: the handler answers any
		// other request by the failure policy, as one it has no binding for.
		resp := admitPod(t, h, path, op, pod, old)
		if resp.Result == nil || strings.Contains(resp.Result.Message, "deleting web") || !strings.Contains(resp.Result.Message, "no binding at /validate/filters for "+string(op)) || !strings.Contains(resp.Result.Message, "expected DELETE of Pod") {
			t.Errorf("%s: %+v, want no binding run: IsDeleted binds DELETE alone", op, resp.Result)
		}
	}
}

// A Container names itself as it is declared.
func TestContainerString(t *testing.T) {
	for c, want := range map[vigil.Container]string{
		vigil.Admission: "Admission",
		vigil.Watcher:   "Watcher",
		vigil.Gates:     "Gates",
		vigil.Phase(0):  "Phase(0)",
		vigil.Phase(3):  "Phase(3)",
	} {
		if got := c.String(); got != want {
			t.Errorf("String() = %q, want %q", got, want)
		}
	}
}

// A binding filtered to namespaces its capability does not govern would
// never run: it is refused at Verify, at its call site, for an exact
// namespace and for an expression that matches none of the capability's.
// One within the capability passes, and plan shows each binding's filters.
func TestDeadNamespaceFiltersAreRefused(t *testing.T) {
	m := vigil.NewModule("dead", vigil.Options{})
	apps := m.Capability("apps", vigil.InNamespaces("apps", "team-a"))
	vigil.Watch(apps, &corev1.ConfigMap{}).InNamespace("other").OnEvent(func(context.Context, *corev1.ConfigMap, vigil.WatchEvent) {}, vigil.EventAdded)
	vigil.When(apps, &corev1.Pod{}).IsCreated().InNamespaceRegex("^team-b").Named("regex").
		Validate(func(context.Context, *vigil.Request[*corev1.Pod]) vigil.Verdict { return admission.Allow() })
	err := m.Verify()
	if err == nil {
		t.Fatal("Verify() = nil; want both dead bindings refused")
	}
	for _, want := range []string{
		"filters_test.go:", `InNamespace("other"): capability apps governs only namespaces apps, team-a, so the binding would never run in other`,
		`InNamespaceRegex("^team-b"): matches none of the namespaces capability apps governs (apps, team-a)`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Verify() = %v\nwant it to say %q", err, want)
		}
	}

	ok := vigil.NewModule("alive", vigil.Options{})
	apps = ok.Capability("apps", vigil.InNamespaces("apps", "team-a"))
	vigil.Watch(apps, &corev1.ConfigMap{}).InNamespace("team-a").WithName("settings").OnEvent(func(context.Context, *corev1.ConfigMap, vigil.WatchEvent) {}, vigil.EventAdded)
	vigil.When(apps, &corev1.Pod{}).IsCreated().InNamespaceRegex("^team-").Named("regex").
		Validate(func(context.Context, *vigil.Request[*corev1.Pod]) vigil.Verdict { return admission.Allow() })
	if err := ok.Verify(); err != nil {
		t.Fatalf("Verify() = %v for bindings within their capability", err)
	}
	code, out := testkit.RunCapture(t, ok, "plan")
	if code != 0 || !strings.Contains(out, "in namespaces [team-a], named settings") || !strings.Contains(out, "in namespaces matching ^team-") {
		t.Errorf("plan (exit %d) does not show the bindings' filters:\n%s", code, out)
	}
}
