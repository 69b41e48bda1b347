package admit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/serving/admit"
)

var podGVK = metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}

func review(t testing.TB, op admissionv1.Operation, obj, old any) []byte {
	t.Helper()
	req := &admissionv1.AdmissionRequest{
		UID: types.UID("uid-1"), Kind: podGVK, Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		Operation: op, Namespace: "apps", Name: "web",
	}
	if obj != nil {
		raw, _ := json.Marshal(obj)
		req.Object = runtime.RawExtension{Raw: raw}
	}
	if old != nil {
		raw, _ := json.Marshal(old)
		req.OldObject = runtime.RawExtension{Raw: raw}
	}
	body, err := json.Marshal(&admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  req,
	})
	if err != nil {
		t.Fatal(err)
	}
	return body
}

func pod(labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web", Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
	}
}

func post(t testing.TB, h http.Handler, path, contentType string, body []byte) (*httptest.ResponseRecorder, *admissionv1.AdmissionResponse) {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	r.Header.Set("Content-Type", contentType)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		return w, nil
	}
	out := &admissionv1.AdmissionReview{}
	if err := json.Unmarshal(w.Body.Bytes(), out); err != nil {
		t.Fatalf("decode response: %v\n%s", err, w.Body)
	}
	if out.Response == nil || out.Response.UID != "uid-1" {
		t.Fatalf("response %s: want the request's uid", w.Body)
	}
	return w, out.Response
}

// postHTTP posts a review to url over HTTP, and returns whether the server
// closes the connection after its answer, and the response.
func postHTTP(t testing.TB, url string, body []byte) (closes bool, _ *admissionv1.AdmissionResponse) {
	t.Helper()
	resp, err := http.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, data)
	}
	out := &admissionv1.AdmissionReview{}
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatalf("decode response: %v\n%s", err, data)
	}
	if out.Response == nil || out.Response.UID != "uid-1" {
		t.Fatalf("response %s: want the request's uid", data)
	}
	return resp.Close, out.Response
}

func handler(policy admission.FailurePolicy, timeout time.Duration, bindings ...spec.Binding) (*admit.Handler, *prometheus.Registry) {
	reg := prometheus.NewRegistry()
	m, err := admit.NewMetrics(reg, "mod")
	if err != nil {
		panic(err)
	}
	for i := range bindings {
		bindings[i].Capability = "policies"
		if bindings[i].Name == "" {
			bindings[i].Name = "b" + string(rune('0'+i))
		}
		if len(bindings[i].Operations) == 0 {
			bindings[i].Operations = []admissionv1.Operation{admissionv1.Create, admissionv1.Update}
		}
	}
	return admit.NewHandler(bindings, admit.Options{Module: "mod", FailurePolicy: policy, Timeout: timeout, Metrics: m, Log: logr.Discard()}), reg
}

var gvk = corev1.SchemeGroupVersion.WithKind("Pod")

func TestMutationsAccumulateIntoOnePatch(t *testing.T) {
	h, reg := handler(admission.Fail, time.Second,
		admit.MutateBinding(gvk, &corev1.Pod{}, func(_ context.Context, r *admission.Request[*corev1.Pod]) error {
			r.SetLabel("team", "shop")
			return nil
		}),
		admit.MutateBinding(gvk, &corev1.Pod{}, func(_ context.Context, r *admission.Request[*corev1.Pod]) error {
			// The second sees the first's edit.
			if v, _ := r.Label("team"); v != "shop" {
				return errors.New("the first mutation's label is missing")
			}
			r.SetAnnotation("seen-by", "second")
			r.RemoveLabel("drop")
			return nil
		}),
	)
	_, resp := post(t, h, admit.MutatePath("mod"), "application/json", review(t, admissionv1.Create, pod(map[string]string{"drop": "x"}), nil))
	if resp == nil || !resp.Allowed || resp.PatchType == nil {
		t.Fatalf("response %+v: want allowed with a patch", resp)
	}
	var ops []map[string]any
	if err := json.Unmarshal(resp.Patch, &ops); err != nil {
		t.Fatal(err)
	}
	patch := string(resp.Patch)
	for _, want := range []string{`"/metadata/labels/team"`, `"/metadata/annotations"`, `"/metadata/labels/drop"`} {
		if !strings.Contains(patch, want) {
			t.Errorf("patch %s lacks %s", patch, want)
		}
	}
	if strings.Contains(patch, "creationTimestamp") || strings.Contains(patch, "/status") {
		t.Errorf("patch %s touches fields no mutation edited", patch)
	}
	if n := counter(t, reg, "b0", "mutated"); n != 1 {
		t.Errorf("vigil_admission_binding_requests_total{binding=b0,verdict=mutated} = %v, want 1", n)
	}
}

// counter reads vigil_admission_binding_requests_total for a binding and verdict.
func counter(t *testing.T, reg *prometheus.Registry, binding, verdict string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "vigil_admission_binding_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["binding"] == binding && labels["verdict"] == verdict && labels["module"] == "mod" && labels["capability"] == "policies" {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func TestValidationDeniesWarnsAndSeesOldObject(t *testing.T) {
	h, _ := handler(admission.Fail, time.Second,
		admit.ValidateBinding(gvk, &corev1.Pod{}, func(_ context.Context, r *admission.Request[*corev1.Pod]) admission.Verdict {
			return admission.Warn("images should be pinned by digest")
		}),
		admit.ValidateBinding(gvk, &corev1.Pod{}, func(_ context.Context, r *admission.Request[*corev1.Pod]) admission.Verdict {
			if r.Operation == admissionv1.Update && r.OldObject.Labels["app"] != r.Object.Labels["app"] {
				return admission.DenyCode(422, "label app is immutable: was "+r.OldObject.Labels["app"])
			}
			return admission.Allow()
		}),
	)
	_, resp := post(t, h, admit.ValidatePath("mod"), "application/json", review(t, admissionv1.Update, pod(map[string]string{"app": "b"}), pod(map[string]string{"app": "a"})))
	if resp.Allowed || resp.Result.Code != 422 || resp.Result.Message != "label app is immutable: was a" {
		t.Fatalf("response %+v, want a 422 denial", resp)
	}
	if len(resp.Warnings) != 1 || resp.Warnings[0] != "images should be pinned by digest" {
		t.Fatalf("warnings %v: want the first binding's warning kept", resp.Warnings)
	}
	_, resp = post(t, h, admit.ValidatePath("mod"), "application/json", review(t, admissionv1.Create, pod(map[string]string{"app": "b"}), nil))
	if !resp.Allowed || len(resp.Warnings) != 1 {
		t.Fatalf("create: %+v, want allowed with a warning", resp)
	}
}

func TestFiltersDecideWhichBindingsRun(t *testing.T) {
	ran := map[string]int{}
	mk := func(name string, f spec.Filter) spec.Binding {
		b := admit.ValidateBinding(gvk, &corev1.Pod{}, func(context.Context, *admission.Request[*corev1.Pod]) admission.Verdict {
			ran[name]++
			return admission.Allow()
		})
		b.Name, b.Filters = name, []spec.Filter{f}
		return b
	}
	h, _ := handler(admission.Fail, time.Second,
		mk("label", spec.WithLabel("app", "web")),
		mk("label-other", spec.WithLabel("app", "db")),
		mk("label-any", spec.WithLabel("app")),
		mk("annotation", spec.WithAnnotation("note")),
		mk("ns", spec.InNamespace("apps")),
		mk("ns-other", spec.InNamespace("kube-system")),
		mk("name", spec.WithName("web")),
		mk("name-re", spec.WithNameRegex(mustRe("^w"))),
		mk("ns-re", spec.InNamespaceRegex(mustRe("^kube-"))),
		mk("deleting", spec.WithDeletionTimestamp()),
	)
	post(t, h, admit.ValidatePath("mod"), "application/json", review(t, admissionv1.Create, pod(map[string]string{"app": "web"}), nil))
	want := map[string]int{"label": 1, "label-any": 1, "ns": 1, "name": 1, "name-re": 1}
	for k, v := range want {
		if ran[k] != v {
			t.Errorf("binding %s ran %d times, want %d", k, ran[k], v)
		}
	}
	if len(ran) != len(want) {
		t.Errorf("bindings that ran: %v, want exactly %v", ran, want)
	}
}

// A binding that errors, panics or sleeps is answered by the failure policy,
// naming the binding; the handler keeps serving.
func TestFailingBindingsAnswerByPolicy(t *testing.T) {
	errB := admit.ValidateBinding(gvk, &corev1.Pod{}, func(context.Context, *admission.Request[*corev1.Pod]) admission.Verdict {
		panic("nil map in the policy")
	})
	errB.Name = "panicky"
	release := make(chan struct{})
	sleepy := admit.MutateBinding(gvk, &corev1.Pod{}, func(context.Context, *admission.Request[*corev1.Pod]) error {
		<-release // ignores its context, for as long as the test runs
		return nil
	})
	sleepy.Name = "sleepy"
	broken := admit.MutateBinding(gvk, &corev1.Pod{}, func(_ context.Context, r *admission.Request[*corev1.Pod]) error {
		r.SetLabel("half", "done")
		return errors.New("exemptions unavailable")
	})
	broken.Name = "broken"

	for _, tc := range []struct {
		policy    admission.FailurePolicy
		path      string
		b         spec.Binding
		wantAllow bool
		want      string
	}{
		{admission.Fail, admit.ValidatePath("mod"), errB, false, `capability "policies" binding "panicky" failed (failurePolicy Fail): panic: nil map in the policy`},
		{admission.Ignore, admit.ValidatePath("mod"), errB, true, `binding "panicky" failed and was skipped`},
		{admission.Fail, admit.MutatePath("mod"), sleepy, false, `binding "sleepy" failed (failurePolicy Fail): did not finish within 200ms`},
		{admission.Ignore, admit.MutatePath("mod"), broken, true, `binding "broken" failed and was skipped (failurePolicy Ignore): exemptions unavailable`},
	} {
		t.Run(string(tc.policy)+"-"+tc.b.Name, func(t *testing.T) {
			h, _ := handler(tc.policy, 200*time.Millisecond, tc.b)
			// Over a real connection: a binding still running past the
			// deadline is answered before its handler returns.
			srv := httptest.NewServer(h)
			t.Cleanup(srv.Close)
			if tc.b.Name == "sleepy" {
				t.Cleanup(func() { close(release) }) // before the server closes, which waits for it
			}
			began := time.Now()
			closes, resp := postHTTP(t, srv.URL+tc.path, review(t, admissionv1.Create, pod(nil), nil))
			if took := time.Since(began); took > time.Second {
				t.Fatalf("answered after %s, want within the 200ms deadline", took)
			}
			if tc.b.Name == "sleepy" && !closes {
				t.Fatal("the answer to a request whose binding still runs keeps the connection open, which that binding still holds: want Connection: close")
			}
			if want := map[bool]int{true: 1}[tc.b.Name == "sleepy"]; h.Lingering() != want {
				t.Fatalf("Lingering() = %d, want %d: the requests answered whose bindings still run", h.Lingering(), want)
			}
			if resp.Allowed != tc.wantAllow {
				t.Fatalf("allowed = %v, want %v (%+v)", resp.Allowed, tc.wantAllow, resp)
			}
			got := strings.Join(resp.Warnings, "; ")
			if resp.Result != nil {
				got += resp.Result.Message
			}
			if !strings.Contains(got, tc.want) {
				t.Fatalf("answer %q, want it to contain %q", got, tc.want)
			}
			if resp.Patch != nil {
				t.Fatalf("a failed mutation sent a patch: %s", resp.Patch)
			}
			// The handler keeps serving: a request it cannot attribute gets
			// the failure policy's answer.
			_, again := postHTTP(t, srv.URL+admit.ValidatePath("mod")+"-unknown", review(t, admissionv1.Create, pod(nil), nil))
			if again == nil || again.Allowed != (tc.policy == admission.Ignore) {
				t.Fatalf("the next request was not served by the failure policy: %+v", again)
			}
		})
	}
}

func TestMalformedRequestsGet4xx(t *testing.T) {
	h, _ := handler(admission.Fail, time.Second)
	good := review(t, admissionv1.Create, pod(nil), nil)
	for _, tc := range []struct {
		name        string
		contentType string
		body        []byte
		code        int
		want        string
	}{
		{"malformed JSON", "application/json", []byte(`{"apiVersion": "admission.k8s.io/v1", "kind": `), 400, "expected a JSON AdmissionReview"},
		{"wrong content type", "text/plain", good, 415, `expected Content-Type application/json, got "text/plain"`},
		{"oversized", "application/json", append([]byte(`{"x":"`), bytes.Repeat([]byte("a"), int(admit.DefaultMaxBodyBytes))...), 413, "at most"},
		{"wrong version", "application/json", bytes.Replace(good, []byte("admission.k8s.io/v1"), []byte("admission.k8s.io/v1beta1"), 1), 400, `got apiVersion "admission.k8s.io/v1beta1"`},
		{"no request", "application/json", []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`), 400, "with a request, got none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, _ := post(t, h, admit.MutatePath("mod"), tc.contentType, tc.body)
			if w.Code != tc.code || !strings.Contains(w.Body.String(), tc.want) {
				t.Fatalf("got %d %q, want %d containing %q", w.Code, w.Body.String(), tc.code, tc.want)
			}
		})
	}
}

// reviewOf is a request for obj of kind gvk, for any kind.
func reviewOf(t testing.TB, kind metav1.GroupVersionKind, resource string, op admissionv1.Operation, obj any) []byte {
	t.Helper()
	raw, _ := json.Marshal(obj)
	body, err := json.Marshal(&admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: types.UID("uid-1"), Kind: kind, Resource: metav1.GroupVersionResource{Group: kind.Group, Version: kind.Version, Resource: resource},
			Operation: op, Namespace: "apps", Name: "web", Object: runtime.RawExtension{Raw: raw},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return body
}

var cmGVK = metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}

func configMap() *corev1.ConfigMap {
	return &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web"}, Data: map[string]string{"token": "t"}}
}

// unattributed reads vigil_admission_unattributed_total for a reason and answer.
func unattributed(t *testing.T, reg *prometheus.Registry, reason, answer string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "vigil_admission_unattributed_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["reason"] == reason && labels["answer"] == answer && labels["module"] == "mod" {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// A request for a path, kind or operation the module does not serve is
// answered by the failure policy, naming what was expected, and counted;
// none of the bindings runs.
func TestUnattributedAnsweredByFailurePolicy(t *testing.T) {
	ran := 0
	podPolicy := admit.ValidateBinding(gvk, &corev1.Pod{}, func(context.Context, *admission.Request[*corev1.Pod]) admission.Verdict {
		ran++
		return admission.Allow()
	})
	podPolicy.Name = "pod-policy"
	for _, tc := range []struct {
		name, path string
		body       []byte
		reason     string
		want       string
	}{
		{"unknown path", "/validate/other", review(t, admissionv1.Create, pod(nil), nil), admit.UnattributedPath,
			`vigil module mod does not serve path /validate/other (request for CREATE of Pod (v1) web): expected /mutate/mod, /validate/mod or /canary/mod`},
		{"another version's path", "/mutate/mod-v2", review(t, admissionv1.Create, pod(nil), nil), admit.UnattributedPath,
			`does not serve path /mutate/mod-v2`},
		{"a Pod binding handed a ConfigMap", admit.ValidatePath("mod"), reviewOf(t, cmGVK, "configmaps", admissionv1.Create, configMap()), admit.UnattributedKind,
			`vigil module mod has no binding at /validate/mod for CREATE of ConfigMap (v1) web: expected CREATE, UPDATE of Pod (v1)`},
		{"an operation no binding is for", admit.ValidatePath("mod"), review(t, admissionv1.Delete, nil, pod(nil)), admit.UnattributedKind,
			`for DELETE of Pod (v1) web: expected CREATE, UPDATE of Pod (v1)`},
		{"a path without bindings", admit.MutatePath("mod"), review(t, admissionv1.Create, pod(nil), nil), admit.UnattributedKind,
			`no binding at /mutate/mod for CREATE of Pod (v1) web: expected nothing: this version of the module has no mutations`},
		{"a canary that is not a ConfigMap", admit.CanaryPath("mod"), review(t, admissionv1.Create, pod(nil), nil), admit.UnattributedKind,
			`expected a ConfigMap (v1), the registration's canary`},
	} {
		for _, policy := range []admission.FailurePolicy{admission.Fail, admission.Ignore} {
			t.Run(tc.name+"/"+string(policy), func(t *testing.T) {
				h, reg := handler(policy, time.Second, podPolicy)
				_, resp := post(t, h, tc.path, "application/json", tc.body)
				if resp == nil {
					t.Fatal("no AdmissionReview answer")
				}
				got := strings.Join(resp.Warnings, "; ")
				if policy == admission.Fail {
					if resp.Allowed || resp.Result == nil || resp.Result.Code != http.StatusInternalServerError {
						t.Fatalf("response %+v: want a denial by failurePolicy Fail", resp)
					}
					got = resp.Result.Message
				} else if !resp.Allowed || len(resp.Warnings) != 1 {
					t.Fatalf("response %+v: want allowed with one warning by failurePolicy Ignore", resp)
				}
				if !strings.Contains(got, tc.want) || !strings.Contains(got, "(failurePolicy "+string(policy)) {
					t.Fatalf("answer %q, want it to contain %q and name the failure policy", got, tc.want)
				}
				if n := unattributed(t, reg, tc.reason, admit.AnswerFailurePolicy); n != 1 {
					t.Errorf("vigil_admission_unattributed_total{reason=%s,answer=failure_policy} = %v, want 1", tc.reason, n)
				}
				if ran != 0 {
					t.Fatalf("the Pod binding ran %d times for an unattributed request", ran)
				}
			})
		}
	}
	// What is attributed but filtered out by a binding's filters is allowed,
	// and not counted.
	filtered := podPolicy
	filtered.Filters = []spec.Filter{spec.InNamespace("elsewhere")}
	h, reg := handler(admission.Fail, time.Second, filtered)
	_, resp := post(t, h, admit.ValidatePath("mod"), "application/json", review(t, admissionv1.Create, pod(nil), nil))
	if resp == nil || !resp.Allowed || ran != 0 {
		t.Fatalf("response %+v (ran %d): want a request the filters exclude allowed without running the binding", resp, ran)
	}
	if n := unattributed(t, reg, admit.UnattributedKind, admit.AnswerFailurePolicy); n != 0 {
		t.Errorf("a filtered request was counted as unattributed: %v", n)
	}
}

// The canary path answers a canary ConfigMap with its token, and counts
// nothing.
func TestCanaryEchoesItsToken(t *testing.T) {
	h, reg := handler(admission.Fail, time.Second)
	_, resp := post(t, h, admit.CanaryPath("mod"), "application/json", reviewOf(t, cmGVK, "configmaps", admissionv1.Create, configMap()))
	if resp == nil || !resp.Allowed || len(resp.Warnings) != 1 || resp.Warnings[0] != admit.CanaryWarning("t") {
		t.Fatalf("response %+v: want allowed with the canary's token", resp)
	}
	if n := unattributed(t, reg, admit.UnattributedKind, admit.AnswerFailurePolicy); n != 0 {
		t.Errorf("the canary was counted as unattributed: %v", n)
	}
}

// During a rollout an older replica receives what only the newer version
// serves: it allows that while, and only while, a newer version is
// registered, and counts it.
func TestUnattributedAllowedOnlyWhileNewerVersionRegistered(t *testing.T) {
	var newer string
	var newerErr error
	asked := 0
	reg := prometheus.NewRegistry()
	m, err := admit.NewMetrics(reg, "mod")
	if err != nil {
		t.Fatal(err)
	}
	label := admit.MutateBinding(gvk, &corev1.Pod{}, func(_ context.Context, r *admission.Request[*corev1.Pod]) error {
		r.SetLabel("v", "1")
		return nil
	})
	label.Capability, label.Name, label.Operations = "policies", "label", []admissionv1.Operation{admissionv1.Create}
	h := admit.NewHandler([]spec.Binding{label}, admit.Options{
		Module: "mod", FailurePolicy: admission.Fail, Timeout: time.Second, Metrics: m, Log: logr.Discard(),
		Newer: func(ctx context.Context) (string, error) {
			asked++
			if _, ok := ctx.Deadline(); !ok {
				t.Error("Newer was asked without a deadline")
			}
			return newer, newerErr
		},
	})
	podForValidation := review(t, admissionv1.Create, pod(nil), nil)

	newer = "1.1.0"
	for _, path := range []string{admit.ValidatePath("mod"), "/validate/other"} {
		_, resp := post(t, h, path, "application/json", podForValidation)
		if resp == nil || !resp.Allowed || len(resp.Warnings) != 0 || resp.Patch != nil {
			t.Fatalf("%s while 1.1.0 is registered: %+v, want allowed", path, resp)
		}
	}
	if n := unattributed(t, reg, admit.UnattributedKind, admit.AnswerRollout); n != 1 {
		t.Errorf("unattributed{reason=kind,answer=newer_version} = %v, want 1", n)
	}
	if n := unattributed(t, reg, admit.UnattributedPath, admit.AnswerRollout); n != 1 {
		t.Errorf("unattributed{reason=path,answer=newer_version} = %v, want 1", n)
	}
	// What this version serves is not asked about.
	before := asked
	_, resp := post(t, h, admit.MutatePath("mod"), "application/json", podForValidation)
	if resp == nil || !resp.Allowed || resp.Patch == nil || asked != before {
		t.Fatalf("a served request: %+v (Newer asked %d times), want the mutation and no question", resp, asked-before)
	}

	// No newer version, or no way to tell: the failure policy answers.
	for _, tc := range []struct {
		newer string
		err   error
	}{{"", nil}, {"", errors.New("the API server is unreachable")}} {
		newer, newerErr = tc.newer, tc.err
		_, resp := post(t, h, admit.ValidatePath("mod"), "application/json", podForValidation)
		if resp == nil || resp.Allowed || !strings.Contains(resp.Result.Message, "(failurePolicy Fail)") {
			t.Fatalf("newer %q err %v: %+v, want the failure policy's denial", tc.newer, tc.err, resp)
		}
	}
	if n := unattributed(t, reg, admit.UnattributedKind, admit.AnswerFailurePolicy); n != 2 {
		t.Errorf("unattributed{reason=kind,answer=failure_policy} = %v, want 2", n)
	}
}

func FuzzDecodeReview(f *testing.F) {
	f.Add(review(f, admissionv1.Create, pod(map[string]string{"a": "b"}), nil))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","object":null}}`))
	f.Add([]byte(`{}`))
	for _, seed := range envelopeSeeds {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		rev, err := admit.DecodeReview(body)
		if err == nil && (rev.Request == nil || rev.Request.UID == "") {
			t.Fatalf("accepted a review without a request uid: %s", body)
		}
		// The request's raw values, handed over uncopied, are what the
		// decoder alone makes of the review.
		if whole, werr := admit.DecodeWhole(body); werr == nil && whole.Request != nil && whole.Request.UID != "" && whole.APIVersion == "admission.k8s.io/v1" && whole.Kind == "AdmissionReview" {
			if err != nil {
				t.Fatalf("refused a review the decoder reads (%v): %s", err, body)
			}
			if !reflect.DeepEqual(rev, whole) {
				t.Fatalf("decoded %s\n as %+v\nthe decoder alone: %+v", body, rev.Request, whole.Request)
			}
		}
		// Whatever the body, the handler answers without panicking.
		h, _ := handler(admission.Fail, time.Second, admit.MutateBinding(gvk, &corev1.Pod{}, func(_ context.Context, r *admission.Request[*corev1.Pod]) error {
			r.SetLabel("fuzz", "1")
			return nil
		}))
		r := httptest.NewRequest(http.MethodPost, admit.MutatePath("mod"), bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != 200 && (w.Code < 400 || w.Code >= 500) {
			t.Fatalf("status %d for %q", w.Code, body)
		}
	})
}

func mustRe(expr string) *regexp.Regexp { return regexp.MustCompile(expr) }

// A binding sees the requests of its own resource or subresource only: a Pod
// binding does not judge pods/ephemeralcontainers unless it asked for it
// (pods/status, which can change labels and annotations, is its UPDATE's), and
// a Scale binding of Deployments does not judge statefulsets/scale.
func TestSubresourceRequestsReachTheirBindingsOnly(t *testing.T) {
	deny := func(msg string) func(context.Context, *admission.Request[*corev1.Pod]) admission.Verdict {
		return func(context.Context, *admission.Request[*corev1.Pod]) admission.Verdict { return admission.Deny(msg) }
	}
	plain := admit.ValidateBinding(gvk, &corev1.Pod{}, deny("plain"))
	debug := admit.ValidateBinding(gvk, &corev1.Pod{}, deny("debug"))
	debug.Subresource = "ephemeralcontainers"
	scale := admit.ValidateBinding(autoscalingv1.SchemeGroupVersion.WithKind("Scale"), &autoscalingv1.Scale{},
		func(context.Context, *admission.Request[*autoscalingv1.Scale]) admission.Verdict {
			return admission.Deny("scale")
		})
	scale.Parent, scale.Subresource = appsv1.SchemeGroupVersion.WithKind("Deployment"), "scale"
	h, _ := handler(admission.Fail, time.Second, plain, debug, scale)

	ask := func(kind metav1.GroupVersionKind, resource metav1.GroupVersionResource, sub string, obj any) string {
		t.Helper()
		raw, _ := json.Marshal(obj)
		body, _ := json.Marshal(&admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request: &admissionv1.AdmissionRequest{UID: "uid-1", Kind: kind, Resource: resource, SubResource: sub,
				Operation: admissionv1.Update, Namespace: "apps", Name: "web", Object: runtime.RawExtension{Raw: raw}},
		})
		_, resp := post(t, h, admit.ValidatePath("mod"), "application/json", body)
		if resp.Allowed {
			return "allowed"
		}
		return resp.Result.Message
	}
	pods := metav1.GroupVersionResource{Version: "v1", Resource: "pods"}
	if got := ask(podGVK, pods, "", pod(nil)); got != "plain" {
		t.Errorf("pods: %q, want only the plain binding to judge it", got)
	}
	if got := ask(podGVK, pods, "ephemeralcontainers", pod(nil)); got != "debug" {
		t.Errorf("pods/ephemeralcontainers: %q, want only the ephemeralcontainers binding to judge it", got)
	}
	if got := ask(podGVK, pods, "status", pod(nil)); got != "plain" {
		t.Errorf("pods/status: %q, want the plain binding, which judges UPDATE, to judge it (it can change labels and annotations)", got)
	}
	scaleKind := metav1.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}
	s := &autoscalingv1.Scale{TypeMeta: metav1.TypeMeta{APIVersion: "autoscaling/v1", Kind: "Scale"}, Spec: autoscalingv1.ScaleSpec{Replicas: 9}}
	if got := ask(scaleKind, metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, "scale", s); got != "scale" {
		t.Errorf("deployments/scale: %q, want the Scale binding to judge it", got)
	}
	if got := ask(scaleKind, metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}, "scale", s); !strings.Contains(got, "has no binding") {
		t.Errorf("statefulsets/scale: %q, want the Deployment's Scale binding to leave it, and the failure policy to answer", got)
	}
}

// The API server lets pods/status change a Pod's labels and annotations, so
// the Pod's UPDATE bindings judge a status write too (its webhook is sent
// only those that change them); a CREATE-only binding does not, nor does
// any other subresource reach a resource's bindings.
func TestStatusWritesReachTheResourcesUpdateBindings(t *testing.T) {
	deny := func(msg string) func(context.Context, *admission.Request[*corev1.Pod]) admission.Verdict {
		return func(context.Context, *admission.Request[*corev1.Pod]) admission.Verdict { return admission.Deny(msg) }
	}
	onCreate := admit.ValidateBinding(gvk, &corev1.Pod{}, deny("create"))
	onCreate.Operations = []admissionv1.Operation{admissionv1.Create}
	onUpdate := admit.ValidateBinding(gvk, &corev1.Pod{}, deny("update"))
	onUpdate.Operations = []admissionv1.Operation{admissionv1.Update}
	h, _ := handler(admission.Fail, time.Second, onCreate, onUpdate)
	ask := func(sub string) string {
		t.Helper()
		raw, _ := json.Marshal(pod(map[string]string{"sidecar.istio.io/inject": "false"}))
		body, _ := json.Marshal(&admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request: &admissionv1.AdmissionRequest{UID: "uid-1", Kind: podGVK, Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
				SubResource: sub, Operation: admissionv1.Update, Namespace: "apps", Name: "web", Object: runtime.RawExtension{Raw: raw}, OldObject: runtime.RawExtension{Raw: raw}},
		})
		_, resp := post(t, h, admit.ValidatePath("mod"), "application/json", body)
		if resp.Allowed {
			return "allowed"
		}
		return resp.Result.Message
	}
	if got := ask("status"); got != "update" {
		t.Errorf("pods/status: %q, want the UPDATE binding, and it alone, to judge it", got)
	}
	if got := ask("ephemeralcontainers"); !strings.Contains(got, "has no binding") {
		t.Errorf("pods/ephemeralcontainers: %q, want no binding of the resource itself to judge it", got)
	}
}

// envelopeSeeds are reviews whose raw values the scan in DecodeReview must
// find as the decoder does, or leave to the decoder.
var envelopeSeeds = []string{
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","object":{"a":"b\\\"}","c":[1,{"d":null}]},"oldObject":null,"options":{"dryRun":["All"]}}}`,
	` { "kind" : "AdmissionReview" , "apiVersion" : "admission.k8s.io/v1" , "request" : { "options" : [ ] , "uid" : "u" , "oldObject" : { "x" : "\u0022" } , "object" : "str" } } `,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","object":{},"object":{"a":1}}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","Object":{"a":1}}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","obj\u0065ct":{"a":1}}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","Request":{"uid":"u","object":{"a":1}}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","object":{"a":1}},"request":{"uid":"v"}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","object":{"a":[}}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","object":{"a":1}}} trailing`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":null}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","userInfo":{"username":"a","groups":["g"],"extra":{"k":["v"]}},"dryRun":true,"operation":"UPDATE","object":{"metadata":{"name":"n"}},"oldObject":{"metadata":{"name":"o"}}}}`,
}

// The scan agrees with the decoder on the seeds (the fuzzer tries more).
func TestDecodeReviewAgreesWithTheDecoder(t *testing.T) {
	for _, seed := range envelopeSeeds {
		rev, err := admit.DecodeReview([]byte(seed))
		whole, werr := admit.DecodeWhole([]byte(seed))
		if werr != nil || whole.Request == nil || whole.Request.UID == "" {
			if err == nil {
				t.Errorf("accepted %s, which the decoder refuses (%v)", seed, werr)
			}
			continue
		}
		if err != nil {
			t.Errorf("refused %s: %v", seed, err)
			continue
		}
		if !reflect.DeepEqual(rev, whole) {
			t.Errorf("decoded %s\n as %+v\nthe decoder alone: %+v", seed, rev.Request, whole.Request)
		}
	}
}

// A mutation that edits more than labels and annotations is patched by
// diffing the object as it came with the object now — for a built-in type
// (compared by its protobuf encoding) and for an unstructured object
// (compared as a copy) alike — and only what it edited is in the patch.
func TestMutationsBeyondMetadataArePatched(t *testing.T) {
	typed, _ := handler(admission.Fail, time.Second,
		admit.MutateBinding(gvk, &corev1.Pod{}, func(_ context.Context, r *admission.Request[*corev1.Pod]) error {
			r.SetLabel("team", "shop")
			r.Object.Spec.ServiceAccountName = "shop"
			return nil
		}))
	untyped, _ := handler(admission.Fail, time.Second,
		admit.MutateBinding(gvk, &unstructured.Unstructured{}, func(_ context.Context, r *admission.Request[*unstructured.Unstructured]) error {
			r.SetLabel("team", "shop")
			return unstructured.SetNestedField(r.Object.Object, "shop", "spec", "serviceAccountName")
		}))
	labelOnly, _ := handler(admission.Fail, time.Second,
		admit.MutateBinding(gvk, &unstructured.Unstructured{}, func(_ context.Context, r *admission.Request[*unstructured.Unstructured]) error {
			r.SetLabel("team", "shop")
			return nil
		}))
	for name, h := range map[string]http.Handler{"typed": typed, "unstructured": untyped, "unstructured, labels only": labelOnly} {
		_, resp := post(t, h, admit.MutatePath("mod"), "application/json", review(t, admissionv1.Create, pod(map[string]string{"app": "x"}), nil))
		if resp == nil || !resp.Allowed {
			t.Fatalf("%s: response %+v: want allowed with a patch", name, resp)
		}
		patch := string(resp.Patch)
		if !strings.Contains(patch, `"/metadata/labels/team"`) {
			t.Errorf("%s: patch %s lacks the label", name, patch)
		}
		if sa := strings.Contains(patch, `"/spec/serviceAccountName"`); sa != (name != "unstructured, labels only") {
			t.Errorf("%s: patch %s: serviceAccountName in it %v, want %v", name, patch, sa, !sa)
		}
		if strings.Contains(patch, "creationTimestamp") || strings.Contains(patch, "/status") || strings.Contains(patch, `"/metadata/labels/app"`) {
			t.Errorf("%s: patch %s touches fields no mutation edited", name, patch)
		}
	}
}
