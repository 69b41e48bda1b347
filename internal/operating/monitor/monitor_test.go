package monitor

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/definition/define"
	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/serving/admit"
)

// The log an admission handler writes is what monitor reads: each decision
// once, filtered, with what it needs to print.
func TestMonitorReadsTheDecisionsAHandlerLogs(t *testing.T) {
	var logged bytes.Buffer
	log := logr.FromSlogHandler(slog.NewTextHandler(&logged, nil))
	gvk := corev1.SchemeGroupVersion.WithKind("Pod")
	deny := define.ValidateBinding(gvk, &corev1.Pod{}, func(_ context.Context, r *admission.Request[*corev1.Pod]) admission.Verdict {
		if r.Object.Labels["bad"] == "true" {
			return admission.Deny("bad pods are refused")
		}
		return admission.Allow()
	})
	deny.Capability, deny.Name = "policies", "no-bad"
	label := define.MutateBinding(gvk, &corev1.Pod{}, func(_ context.Context, r *admission.Request[*corev1.Pod]) error {
		r.SetLabel("team", "shop")
		return nil
	})
	label.Capability, label.Name = "labels", "team"
	deny.Operations = []admissionv1.Operation{admissionv1.Create}
	label.Operations = []admissionv1.Operation{admissionv1.Create}
	h := admit.NewHandler([]spec.Binding{deny, label}, admit.Options{Module: "m", Timeout: time.Second, Log: log, LogDecisions: 100})
	post := func(path, uid, ns string, labels map[string]string) {
		raw, _ := json.Marshal(&corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Name: "p-" + uid, Namespace: ns, Labels: labels}})
		body, _ := json.Marshal(&admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request: &admissionv1.AdmissionRequest{UID: types.UID(uid), Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
				Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"}, Operation: admissionv1.Create, Namespace: ns, Name: "p-" + uid,
				UserInfo: authenticationv1.UserInfo{Username: "alice"}, Object: runtime.RawExtension{Raw: raw}}})
		r := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			t.Fatalf("%s: %d %s", path, w.Code, w.Body)
		}
	}
	post(admit.ValidatePath("m"), "u1", "apps", map[string]string{"bad": "true"})
	post(admit.ValidatePath("m"), "u2", "apps", nil)
	post(admit.MutatePath("m"), "u3", "web", nil)
	post(admit.ValidatePath("m"), "u4", "web", map[string]string{"bad": "true"})
	lines := logged.String()

	read := func(f Filter, text string) []Decision {
		var got []Decision
		(&follower{pod: "m-abc"}).read(strings.NewReader(text), func(d Decision) {
			if f.Match(d) {
				got = append(got, d)
			}
		})
		return got
	}
	all := read(Filter{}, lines)
	if len(all) != 4 {
		t.Fatalf("%d decisions read, want 4:\n%s", len(all), lines)
	}
	if d := all[0]; d.Verdict != "denied" || d.Capability != "policies" || d.Binding != "no-bad" || d.User != "alice" || d.Message != "bad pods are refused" ||
		d.Operation != "CREATE" || d.Kind != "Pod" || d.Namespace != "apps" || d.Name != "p-u1" || d.Pod != "m-abc" || d.Took == "" {
		t.Errorf("first decision %+v", d)
	}
	if d := all[2]; d.Verdict != "mutated" || !strings.Contains(d.Patch, "team") {
		t.Errorf("mutation %+v: want mutated with its patch", d)
	}
	if got := read(Filter{Verdict: "denied", Namespace: "web"}, lines); len(got) != 1 || got[0].UID != "u4" {
		t.Errorf("denied in web: %+v, want u4 alone", got)
	}
	if got := read(Filter{Capability: "labels"}, lines); len(got) != 1 || got[0].UID != "u3" {
		t.Errorf("capability labels: %+v, want u3 alone", got)
	}
	// A stream started again from the last second reads those lines again:
	// each decision is handed on once.
	f := &follower{pod: "m-abc"}
	var n int
	f.read(strings.NewReader(lines), func(Decision) { n++ })
	f.read(strings.NewReader(lines), func(Decision) { n++ })
	if n != 4 {
		t.Errorf("%d decisions from the same lines read twice, want 4", n)
	}
	if err := (Filter{Verdict: "rejected"}).Check(); err == nil || !strings.Contains(err.Error(), "allowed, denied, mutated, warned") {
		t.Errorf("an unknown verdict: %v", err)
	}
	var out bytes.Buffer
	Write(&out, all[0])
	if s := out.String(); !strings.Contains(s, "DENIED  CREATE Pod p-u1 in apps by alice  [policies/no-bad]") || !strings.Contains(s, "message: bad pods are refused") {
		t.Errorf("printed %q", s)
	}
	out.Reset()
	if err := WriteJSON(&out, all[2]); err != nil || !strings.Contains(out.String(), `"verdict":"mutated"`) {
		t.Errorf("json %q, %v", out.String(), err)
	}
}

// A denial quoting 1.2 MB of a tenant's dry-run Pod is logged cut: monitor
// reads it as the decision it is, and says which field was cut and how
// large it was.
func TestMonitorReadsADecisionCutAtItsBound(t *testing.T) {
	var logged bytes.Buffer
	log := logr.FromSlogHandler(slog.NewTextHandler(&logged, nil))
	gvk := corev1.SchemeGroupVersion.WithKind("Pod")
	deny := define.ValidateBinding(gvk, &corev1.Pod{}, func(_ context.Context, r *admission.Request[*corev1.Pod]) admission.Verdict {
		return admission.Deny("note " + r.Object.Annotations["note"] + " is refused")
	})
	deny.Capability, deny.Name, deny.Operations = "policies", "no-notes", []admissionv1.Operation{admissionv1.Create}
	h := admit.NewHandler([]spec.Binding{deny}, admit.Options{Module: "m", Timeout: time.Second, Log: log, LogDecisions: 100})
	note := strings.Repeat("n", 1200<<10)
	raw, _ := json.Marshal(&corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: "apps", Annotations: map[string]string{"note": note}}})
	body, _ := json.Marshal(&admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: "u1", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, DryRun: ptr.To(true),
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"}, Operation: admissionv1.Create, Namespace: "apps", Name: "big",
			UserInfo: authenticationv1.UserInfo{Username: "mallory"}, Object: runtime.RawExtension{Raw: raw}}})
	r := httptest.NewRequest(http.MethodPost, admit.ValidatePath("m"), bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if n := logged.Len(); n > admit.MaxDecisionLine {
		t.Errorf("%d bytes logged, want at most MaxDecisionLine %d", n, admit.MaxDecisionLine)
	}
	var got []Decision
	(&follower{pod: "m-abc"}).read(strings.NewReader(logged.String()), func(d Decision) { got = append(got, d) })
	whole := len("note  is refused") + len(note)
	if len(got) != 1 || got[0].Verdict != "denied" || !got[0].DryRun || got[0].User != "mallory" || got[0].Cut["message"] != whole ||
		len(got[0].Message) != admit.MaxLoggedText {
		t.Fatalf("read %+v from a %d-byte line: want one denied dry run of mallory, its message cut at %d and its whole %d bytes said",
			got, logged.Len(), admit.MaxLoggedText, whole)
	}
	var out bytes.Buffer
	Write(&out, got[0])
	if want := fmt.Sprintf("cut by the replica, too long to log whole: message (%d bytes)", whole); !strings.Contains(out.String(), want) {
		t.Errorf("printed %.300q..., want %q", out.String(), want)
	}
}

// A replica's report of the decisions it left out reaches monitor whatever
// its filters: who was left out, and how many.
func TestMonitorShowsWhoWasLeftOut(t *testing.T) {
	var logged bytes.Buffer
	log := logr.FromSlogHandler(slog.NewTextHandler(&logged, nil))
	gvk := corev1.SchemeGroupVersion.WithKind("Pod")
	allow := define.ValidateBinding(gvk, &corev1.Pod{}, func(context.Context, *admission.Request[*corev1.Pod]) admission.Verdict { return admission.Allow() })
	allow.Capability, allow.Name, allow.Operations = "policies", "any", []admissionv1.Operation{admissionv1.Create}
	h := admit.NewHandler([]spec.Binding{allow}, admit.Options{Module: "m", Timeout: time.Second, Log: log, LogDecisions: 4})
	post := func(user string) {
		raw, _ := json.Marshal(&corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "tenant"}})
		body, _ := json.Marshal(&admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request: &admissionv1.AdmissionRequest{UID: "u", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, DryRun: ptr.To(true),
				Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"}, Operation: admissionv1.Create, Namespace: "tenant", Name: "p",
				UserInfo: authenticationv1.UserInfo{Username: user}, Object: runtime.RawExtension{Raw: raw}}})
		r := httptest.NewRequest(http.MethodPost, admit.ValidatePath("m"), bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	// The bound 4 leaves one line a second for dry runs: the rest of the
	// second's 5 are left out, and the next second's first reports them.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
	for range 5 {
		post("mallory")
	}
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
	post("mallory")
	var got []Decision
	(&follower{pod: "m-abc"}).read(strings.NewReader(logged.String()), func(d Decision) {
		if (Filter{Verdict: "denied", Namespace: "apps"}).Match(d) {
			got = append(got, d)
		}
	})
	if len(got) != 1 || got[0].Unlogged == nil || got[0].Unlogged.Decisions != "4" || got[0].Unlogged.By != `"mallory" in "tenant": 4 (4 dry runs)` {
		t.Fatalf("through a filter for denials in apps: %+v, want only the report that 4 of mallory's dry runs in tenant were left out:\n%s", got, logged.String())
	}
	// A stream started again from the last second reads it once.
	f, reports := &follower{pod: "m-abc"}, 0
	for range 2 {
		f.read(strings.NewReader(logged.String()), func(d Decision) {
			if d.Unlogged != nil {
				reports++
			}
		})
	}
	if reports != 1 {
		t.Errorf("%d reports from the same lines read twice, want 1", reports)
	}
	var out bytes.Buffer
	Write(&out, got[0])
	if !strings.Contains(out.String(), "UNLOGGED 4 decisions (4 dry runs, 0 denied)") || !strings.Contains(out.String(), `by: "mallory" in "tenant": 4 (4 dry runs)`) {
		t.Errorf("printed %q", out.String())
	}
	out.Reset()
	if err := WriteJSON(&out, got[0]); err != nil || !strings.Contains(out.String(), `"unlogged":{"decisions":"4"`) || strings.Contains(out.String(), `"verdict"`) {
		t.Errorf("json %q, %v", out.String(), err)
	}
}
