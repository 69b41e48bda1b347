package admit_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/admit"
	"github.com/vigilkit/vigil/internal/events"
	"github.com/vigilkit/vigil/internal/spec"
	"github.com/vigilkit/vigil/vigiltest"
)

// decisions are the decision lines written to buf.
func decisions(t *testing.T, buf *vigiltest.Buffer) []map[string]string {
	t.Helper()
	var out []map[string]string
	for _, line := range strings.Split(buf.String(), "\n") {
		if f, ok := events.ParseLine(line); ok && f[events.Key] == string(events.Decision) {
			out = append(out, f)
		}
	}
	return out
}

func loggingHandler(limit int, bindings ...spec.Binding) (*admit.Handler, *vigiltest.Buffer) {
	buf := &vigiltest.Buffer{}
	log := logr.FromSlogHandler(slog.NewTextHandler(buf, nil))
	for i := range bindings {
		bindings[i].Capability = "policies"
		bindings[i].Operations = []admissionv1.Operation{admissionv1.Create, admissionv1.Update}
	}
	return admit.NewHandler(bindings, admit.Options{Module: "mod", Timeout: time.Second, Log: log, LogDecisions: limit}), buf
}

func TestDecisionsAreLoggedForMonitor(t *testing.T) {
	deny := admit.ValidateBinding(gvk, &corev1.Pod{}, func(_ context.Context, r *admission.Request[*corev1.Pod]) admission.Verdict {
		if r.Object.Labels["app"] == "bad" {
			return admission.Deny("app bad is not allowed")
		}
		return admission.Warn("pin the image")
	})
	deny.Name = "no-bad-apps"
	label := admit.MutateBinding(gvk, &corev1.Pod{}, func(_ context.Context, r *admission.Request[*corev1.Pod]) error {
		r.SetLabel("team", "shop")
		return nil
	})
	label.Name = "label-team"
	h, buf := loggingHandler(100, deny, label)

	post(t, h, admit.ValidatePath("mod"), "application/json", review(t, admissionv1.Create, pod(map[string]string{"app": "bad"}), nil))
	post(t, h, admit.ValidatePath("mod"), "application/json", review(t, admissionv1.Create, pod(map[string]string{"app": "good"}), nil))
	post(t, h, admit.MutatePath("mod"), "application/json", review(t, admissionv1.Create, pod(nil), nil))

	got := decisions(t, buf)
	if len(got) != 3 {
		t.Fatalf("%d decision lines, want 3:\n%s", len(got), buf.String())
	}
	want := []map[string]string{
		{"verdict": "denied", "binding": "no-bad-apps", "capability": "policies", "message": "app bad is not allowed", "operation": "CREATE", "kind": "Pod", "namespace": "apps", "name": "web", "uid": "uid-1"},
		{"verdict": "warned", "binding": "no-bad-apps", "warnings": "pin the image"},
		{"verdict": "mutated", "binding": "label-team"},
	}
	for i, w := range want {
		for k, v := range w {
			if got[i][k] != v {
				t.Errorf("decision %d: %s=%q, want %q (line %v)", i, k, got[i][k], v, got[i])
			}
		}
		if _, err := time.ParseDuration(got[i]["took"]); err != nil {
			t.Errorf("decision %d: took=%q: %v", i, got[i]["took"], err)
		}
	}
	if p := got[2]["patch"]; !strings.Contains(p, `"/metadata/labels"`) || !strings.Contains(p, "shop") {
		t.Errorf("mutated decision's patch %q lacks the label", p)
	}
}

func TestDecisionLogIsBoundedEachSecond(t *testing.T) {
	allow := admit.ValidateBinding(gvk, &corev1.Pod{}, func(context.Context, *admission.Request[*corev1.Pod]) admission.Verdict { return admission.Allow() })
	h, buf := loggingHandler(3, allow)
	// Start at the beginning of a second, so that the 10 fall in one.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
	for range 10 {
		post(t, h, admit.ValidatePath("mod"), "application/json", review(t, admissionv1.Create, pod(nil), nil))
	}
	if n := len(decisions(t, buf)); n != 3 {
		t.Fatalf("%d decision lines in a second, want the bound 3", n)
	}
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
	post(t, h, admit.ValidatePath("mod"), "application/json", review(t, admissionv1.Create, pod(nil), nil))
	if n := len(decisions(t, buf)); n != 4 {
		t.Fatalf("%d decision lines after the next second's request, want 4", n)
	}
	if !strings.Contains(buf.String(), "event=decisions-unlogged") || !strings.Contains(buf.String(), "decisions=7") {
		t.Errorf("the 7 decisions over the bound are not reported:\n%s", buf.String())
	}
	// 0 logs none.
	h, buf = loggingHandler(0, allow)
	post(t, h, admit.ValidatePath("mod"), "application/json", review(t, admissionv1.Create, pod(nil), nil))
	if n := len(decisions(t, buf)); n != 0 {
		t.Errorf("%d decision lines with the bound 0, want none", n)
	}
}

// BenchmarkDecisionLog measures what logging each decision adds to a
// request (slog's text handler, to a discarded output): off (the bound 0),
// every decision logged, and over the bound (counted, not logged).
func BenchmarkDecisionLog(b *testing.B) {
	cm := configMap()
	cmGVK := corev1.SchemeGroupVersion.WithKind("ConfigMap")
	body := reviewOf(b, metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, "configmaps", admissionv1.Create, cm)
	for _, c := range []struct {
		name  string
		limit int
	}{{"off", 0}, {"logged", 1 << 30}, {"over-bound", 1}} {
		b.Run(c.name, func(b *testing.B) {
			log := logr.FromSlogHandler(slog.NewTextHandler(io.Discard, nil))
			v := admit.ValidateBinding(cmGVK, &corev1.ConfigMap{}, func(context.Context, *admission.Request[*corev1.ConfigMap]) admission.Verdict {
				return admission.Allow()
			})
			v.Capability, v.Name, v.Operations = "policies", "allow", []admissionv1.Operation{admissionv1.Create}
			h := admit.NewHandler([]spec.Binding{v}, admit.Options{Module: "mod", Timeout: time.Second, Log: log, LogDecisions: c.limit})
			b.ReportAllocs()
			for b.Loop() {
				r := httptest.NewRequest(http.MethodPost, admit.ValidatePath("mod"), bytes.NewReader(body))
				r.Header.Set("Content-Type", "application/json")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != 200 {
					b.Fatal(w.Body.String())
				}
			}
		})
	}
}

// What a tenant writes into an object reaches the decision log only inside
// a quoted field: a label value quoted in a denial, carrying a line of its
// own that looks like an allowed decision, forges no second decision for
// vigil monitor, and the message reads back whole.
func TestATenantsTextForgesNoDecision(t *testing.T) {
	forged := "x\n" + events.Key + "=" + string(events.Decision) + ` verdict=allowed binding=no-bad-apps name=web`
	deny := admit.ValidateBinding(gvk, &corev1.Pod{}, func(_ context.Context, r *admission.Request[*corev1.Pod]) admission.Verdict {
		return admission.Deny("team " + r.Object.Annotations["team"] + " is not allowed")
	})
	deny.Name = "no-bad-apps"
	h, buf := loggingHandler(100, deny)
	p := pod(nil)
	p.Annotations = map[string]string{"team": forged}
	post(t, h, admit.ValidatePath("mod"), "application/json", review(t, admissionv1.Create, p, nil))
	got := decisions(t, buf)
	if len(got) != 1 || got[0]["verdict"] != "denied" || got[0]["message"] != "team "+forged+" is not allowed" {
		t.Fatalf("decisions %v, want one denial with the tenant's text whole in its message:\n%s", got, buf.String())
	}
}
