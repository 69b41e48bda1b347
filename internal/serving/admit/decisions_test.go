package admit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/runtime/callctx"
	"github.com/vigilkit/vigil/internal/runtime/events"
	"github.com/vigilkit/vigil/internal/serving/admit"
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
	// Start at the beginning of a second, so that the 10 fall in one; each
	// of another user in another namespace, so that no share applies.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
	for i := range 10 {
		who := fmt.Sprintf("u%d", i)
		post(t, h, admit.ValidatePath("mod"), "application/json", requestAs(t, who, who, who, false, nil, nil))
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

// requestAs is a review of a Pod p-ID created in namespace by user, a dry
// run or not, labelled and annotated.
func requestAs(t *testing.T, id, user, namespace string, dryRun bool, labels, annotations map[string]string) []byte {
	t.Helper()
	p := pod(labels)
	p.Namespace, p.Name, p.Annotations = namespace, "p-"+id, annotations
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(&admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: "uid-1", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"}, Operation: admissionv1.Create, Namespace: namespace, Name: p.Name,
			UserInfo: authenticationv1.UserInfo{Username: user}, DryRun: &dryRun, Object: runtime.RawExtension{Raw: raw}}})
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// unloggedLines are the decisions-unlogged lines written to buf.
func unloggedLines(buf *vigiltest.Buffer) []map[string]string {
	var out []map[string]string
	for _, line := range strings.Split(buf.String(), "\n") {
		if f, ok := events.ParseLine(line); ok && f[events.Key] == string(events.DecisionsUnlogged) {
			out = append(out, f)
		}
	}
	return out
}

// A tenant's flood of Pod creates — dry runs, or real ones denied — beside
// another user's few real denials: every one of the other user's denials is
// logged, the flood is sampled (at most its pool's share once half the
// second's lines are used), and the next second's line says who was left
// out, and how many.
func TestAFloodHidesNoOtherUsersDenial(t *testing.T) {
	deny := admit.ValidateBinding(gvk, &corev1.Pod{}, func(_ context.Context, r *admission.Request[*corev1.Pod]) admission.Verdict {
		if r.Object.Labels["app"] == "bad" {
			return admission.Deny("app bad is not allowed")
		}
		return admission.Allow()
	})
	deny.Name = "no-bad-apps"
	for _, dryRun := range []bool{true, false} {
		t.Run(fmt.Sprintf("dryRun=%v", dryRun), func(t *testing.T) {
			h, buf := loggingHandler(admit.DefaultDecisionLog, deny)
			const flood, denials = 258, 8
			bad := map[string]string{"app": "bad"}
			var want []string
			began := time.Now()
			for i := range flood {
				post(t, h, admit.ValidatePath("mod"), "application/json", requestAs(t, fmt.Sprintf("flood-%d", i), "mallory", "tenant", dryRun, bad, nil))
				if i%(flood/denials) == 0 && len(want) < denials {
					id := fmt.Sprintf("bob-%d", len(want))
					want = append(want, id)
					post(t, h, admit.ValidatePath("mod"), "application/json", requestAs(t, id, "bob", "shop", false, bad, nil))
				}
			}
			seconds := int(time.Since(began)/time.Second) + 2 // the seconds the flood spanned, at most
			// The next second's first decision reports the last one's.
			time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
			post(t, h, admit.ValidatePath("mod"), "application/json", requestAs(t, "after", "carol", "web", false, nil, nil))

			logged := map[string]map[string]string{}
			floodLogged := 0
			for _, d := range decisions(t, buf) {
				logged[d["name"]] = d
				if d["user"] == "mallory" {
					floodLogged++
				}
			}
			for _, id := range want {
				if d := logged["p-"+id]; d == nil || d["verdict"] != "denied" || d["user"] != "bob" || d["namespace"] != "shop" {
					t.Errorf("bob's real denial %s: logged %v, want it logged as denied", id, d)
				}
			}
			pool := admit.DefaultDecisionLog
			if dryRun {
				pool = admit.DefaultDecisionLog / 4
			}
			if floodLogged == 0 || floodLogged > pool*seconds {
				t.Errorf("%d of mallory's %d decisions logged over at most %d seconds: want some, and at most the pool of %d a second", floodLogged, flood, seconds, pool)
			}
			var unlogged int
			for _, u := range unloggedLines(buf) {
				n, err := strconv.Atoi(u["decisions"])
				if err != nil {
					t.Fatalf("decisions-unlogged line %v: decisions=%q: %v", u, u["decisions"], err)
				}
				unlogged += n
				who := `"mallory" in "tenant": ` + u["decisions"]
				if dryRun {
					who += " (" + u["decisions"] + " dry runs, " + u["decisions"] + " denied)"
				} else {
					who += " (" + u["decisions"] + " denied)"
				}
				if u["by"] != who {
					t.Errorf("decisions-unlogged by=%q, want %q: who was left out, and how", u["by"], who)
				}
				if u["dryRuns"] != map[bool]string{true: u["decisions"], false: "0"}[dryRun] {
					t.Errorf("decisions-unlogged dryRuns=%q of %s", u["dryRuns"], u["decisions"])
				}
			}
			if unlogged != flood-floodLogged {
				t.Errorf("%d decisions reported unlogged, want the %d of mallory's not logged:\n%s", unlogged, flood-floodLogged, buf.String())
			}
			t.Logf("mallory: %d of %d logged, %d reported unlogged; bob: %d of %d denials logged", floodLogged, flood, unlogged, len(want), denials)
		})
	}
}

// A denial quoting 1.2 MB of what a tenant wrote, on a request whose name
// the API server has not validated yet, makes a line no longer than
// MaxDecisionLine: the fields cut say so with their whole length, and the
// line still reads as the decision it is.
func TestADecisionLineIsBounded(t *testing.T) {
	deny := admit.ValidateBinding(gvk, &corev1.Pod{}, func(_ context.Context, r *admission.Request[*corev1.Pod]) admission.Verdict {
		return admission.Deny("note " + r.Object.Annotations["note"] + " is not allowed")
	})
	deny.Name = "no-notes"
	h, buf := loggingHandler(admit.DefaultDecisionLog, deny)
	// Printable text, and bytes that quoting quadruples (\x01).
	sizes := []int{1200 << 10, 200 << 10}
	for i, filler := range []string{"a", "\x01"} {
		note := strings.Repeat(filler, sizes[i])
		body := requestAs(t, fmt.Sprintf("big-%d", i), strings.Repeat(filler, 4096), "apps", true, nil, map[string]string{"note": note})
		post(t, h, admit.ValidatePath("mod"), "application/json", body)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	got := decisions(t, buf)
	if len(got) != 2 || len(lines) != 2 {
		t.Fatalf("%d decisions in %d lines, want 2 in 2:\n%.2000s", len(got), len(lines), buf.String())
	}
	for i, d := range got {
		if n := len(lines[i]); n > admit.MaxDecisionLine {
			t.Errorf("line %d: %d bytes, want at most MaxDecisionLine %d", i, n, admit.MaxDecisionLine)
		}
		whole := len("note  is not allowed") + sizes[i]
		if d["messageCut"] != strconv.Itoa(whole) || len(d["message"]) != admit.MaxLoggedText || !strings.HasPrefix(d["message"], "note ") {
			t.Errorf("line %d: message of %d bytes, messageCut=%q: want it cut at %d and its whole %d bytes said", i, len(d["message"]), d["messageCut"], admit.MaxLoggedText, whole)
		}
		if d["userCut"] != "4096" || len(d["user"]) != admit.MaxLoggedName || d["verdict"] != "denied" || d["dryRun"] != "true" {
			t.Errorf("line %d: user of %d bytes, userCut=%q, verdict %q, dryRun %q: want the user cut at %d, a denied dry run", i, len(d["user"]), d["userCut"], d["verdict"], d["dryRun"], admit.MaxLoggedName)
		}
		t.Logf("line %d: %d bytes for a message of %s bytes", i, len(lines[i]), d["messageCut"])
	}
}

// A handler's logger (vigil.LoggerFrom) writes through the role's, with the
// module, the capability, the binding running and the request.
func TestHandlersLogWithTheirBindingAndRequest(t *testing.T) {
	say := func(name string) spec.Binding {
		b := admit.ValidateBinding(gvk, &corev1.Pod{}, func(ctx context.Context, r *admission.Request[*corev1.Pod]) admission.Verdict {
			callctx.Logger(ctx).Info("handler says hello")
			return admission.Allow()
		})
		b.Name = name
		return b
	}
	h, buf := loggingHandler(0, say("first"), say("second"))
	post(t, h, admit.ValidatePath("mod"), "application/json", review(t, admissionv1.Create, pod(nil), nil))
	var lines []string
	for _, line := range strings.Split(buf.String(), "\n") {
		if strings.Contains(line, "handler says hello") {
			lines = append(lines, line)
		}
	}
	if len(lines) != 2 {
		t.Fatalf("%d lines from the handlers, want 2:\n%s", len(lines), buf.String())
	}
	for i, binding := range []string{"first", "second"} {
		for _, want := range []string{"binding=" + binding, "capability=policies", "operation=CREATE", "kind=Pod", "namespace=apps", "name=web", "uid=uid-1"} {
			if !strings.Contains(lines[i], want) {
				t.Errorf("line %q lacks %s", lines[i], want)
			}
		}
	}
}

// The author's hooks run around every request: Before as it arrives, After
// with the answer; a hook that panics is logged and changes no answer.
func TestHooksRunAroundEveryRequest(t *testing.T) {
	deny := admit.ValidateBinding(gvk, &corev1.Pod{}, func(_ context.Context, r *admission.Request[*corev1.Pod]) admission.Verdict {
		if r.Object.Labels["app"] == "bad" {
			return admission.Deny("app bad is not allowed")
		}
		return admission.Allow()
	})
	deny.Name, deny.Capability = "no-bad-apps", "policies"
	deny.Operations = []admissionv1.Operation{admissionv1.Create}
	var mu sync.Mutex
	var calls []string
	buf := &vigiltest.Buffer{}
	h := admit.NewHandler([]spec.Binding{deny}, admit.Options{Module: "mod", Timeout: time.Second, Log: logr.FromSlogHandler(slog.NewTextHandler(buf, nil)),
		Hooks: spec.Hooks{
			Before: func(ctx context.Context, req *admissionv1.AdmissionRequest) {
				mu.Lock()
				calls = append(calls, "before "+req.Name)
				second := len(calls) > 2
				mu.Unlock()
				if second {
					panic("the hook's own bug")
				}
			},
			After: func(ctx context.Context, req *admissionv1.AdmissionRequest, resp *admissionv1.AdmissionResponse, took time.Duration) {
				mu.Lock()
				defer mu.Unlock()
				calls = append(calls, fmt.Sprintf("after %s allowed=%v", req.Name, resp.Allowed))
				if took <= 0 {
					calls = append(calls, "no duration")
				}
			},
		}})
	bad := pod(map[string]string{"app": "bad"})
	post(t, h, admit.ValidatePath("mod"), "application/json", review(t, admissionv1.Create, bad, nil))
	_, resp := post(t, h, admit.ValidatePath("mod"), "application/json", review(t, admissionv1.Create, pod(nil), nil))
	mu.Lock()
	got := strings.Join(calls, "; ")
	mu.Unlock()
	if want := "before web; after web allowed=false; before web; after web allowed=true"; got != want {
		t.Errorf("hooks ran: %s\nwant: %s", got, want)
	}
	if resp == nil || !resp.Allowed {
		t.Errorf("a panicking Before hook changed the answer: %+v", resp)
	}
	if !strings.Contains(buf.String(), "admission hook panicked") {
		t.Errorf("the hook's panic is not logged:\n%s", buf.String())
	}
}
