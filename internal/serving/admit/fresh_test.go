package admit_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/runtime/callctx"
	"github.com/vigilkit/vigil/internal/serving/admit"
	"github.com/vigilkit/vigil/internal/serving/fresh"
)

// lagging is a lister whose cache lags the API server until a barrier's
// round trip, after which the watch delivers what the server holds.
type lagging struct {
	mu              sync.Mutex
	server, cache   map[string]string
	serverV, cacheV int
	rounds          int
	hang            bool
	barrier         *fresh.Barrier
}

func newLagging(server, cache map[string]string) *lagging {
	l := &lagging{server: server, cache: cache, serverV: 2, cacheV: 1}
	l.barrier = fresh.NewBarrier("Exemption", l)
	return l
}

func (l *lagging) Latest(ctx context.Context, _ fresh.Scope) (fresh.Snapshot, error) {
	if l.hang {
		<-ctx.Done()
		return fresh.Snapshot{}, ctx.Err()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rounds++
	l.cache, l.cacheV = l.server, l.serverV
	return fresh.Snapshot{ResourceVersion: strconv.Itoa(l.serverV)}, nil
}

func (l *lagging) Caught(s fresh.Snapshot) (bool, error) {
	want, _ := strconv.Atoi(s.ResourceVersion)
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cacheV >= want, nil
}

func (l *lagging) Changed() <-chan struct{} { return make(chan struct{}) }

// get reads key from the cache as a lister does, recording the read.
func (l *lagging) get(ctx context.Context, key string) (string, bool) {
	l.mu.Lock()
	v, ok := l.cache[key]
	l.mu.Unlock()
	callctx.Reads(ctx).Note(l.barrier, fresh.Scope{}, ok)
	return v, ok
}

func (l *lagging) roundTrips() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rounds
}

func rechecking(policy admission.FailurePolicy, timeout time.Duration, b spec.Binding) (*admit.Handler, *prometheus.Registry) {
	reg := prometheus.NewRegistry()
	m, err := admit.NewMetrics(reg, "mod")
	if err != nil {
		panic(err)
	}
	b.Capability, b.Name = "policies", "exempt"
	return admit.NewHandler([]spec.Binding{b}, admit.Options{Module: "mod", FailurePolicy: policy, Timeout: timeout, Metrics: m, Log: logr.Discard(), Recheck: true}), reg
}

// exemptOnly denies every pod not named in the lister, counting its runs.
func exemptOnly(l *lagging, runs *int) spec.Binding {
	var mu sync.Mutex
	return admit.ValidateBinding(gvk, &corev1.Pod{}, func(ctx context.Context, r *admission.Request[*corev1.Pod]) admission.Verdict {
		mu.Lock()
		*runs++
		mu.Unlock()
		if _, ok := l.get(ctx, r.Name); ok {
			return admission.Allow()
		}
		return admission.Deny("no exemption for " + r.Name)
	})
}

func rechecks(t *testing.T, reg *prometheus.Registry, outcome string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "vigil_admission_rechecks_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "outcome" && lp.GetValue() == outcome {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func TestADenialOnAStaleCacheIsMadeAgainOnFreshData(t *testing.T) {
	// The Exemption exists on the server; the cache has not seen it yet.
	l := newLagging(map[string]string{"web": "exempt"}, map[string]string{})
	runs := 0
	h, reg := rechecking(admission.Fail, 2*time.Second, exemptOnly(l, &runs))
	_, resp := post(t, h, admit.ValidatePath("mod"), "application/json", review(t, admissionv1.Create, pod(nil), nil))
	if resp == nil || !resp.Allowed {
		t.Fatalf("response %+v: want allowed once the cache has caught up", resp)
	}
	if runs != 2 || l.roundTrips() != 1 {
		t.Fatalf("runs = %d, round trips = %d: want the binding run twice around one round trip", runs, l.roundTrips())
	}
	if n := rechecks(t, reg, "changed"); n != 1 {
		t.Errorf("vigil_admission_rechecks_total{outcome=changed} = %v, want 1", n)
	}
	if n := counter(t, reg, "exempt", "allowed"); n != 1 {
		t.Errorf("binding_requests_total{verdict=allowed} = %v, want 1: a recheck is one request", n)
	}
}

func TestAnExemptionOnlyTheStaleCacheHoldsIsNotHonoured(t *testing.T) {
	// The Exemption was deleted on the server; the cache still holds it.
	l := newLagging(map[string]string{}, map[string]string{"web": "exempt"})
	runs := 0
	h, _ := rechecking(admission.Fail, 2*time.Second, exemptOnly(l, &runs))
	_, resp := post(t, h, admit.ValidatePath("mod"), "application/json", review(t, admissionv1.Create, pod(nil), nil))
	if resp == nil || resp.Allowed || !strings.Contains(resp.Result.Message, "no exemption for web") {
		t.Fatalf("response %+v: want denied once the cache has caught up", resp)
	}
	if runs != 2 {
		t.Fatalf("runs = %d, want 2", runs)
	}
}

func TestOrdinaryAllowsStayOnTheFastPath(t *testing.T) {
	l := newLagging(map[string]string{}, map[string]string{})
	runs := 0
	b := admit.ValidateBinding(gvk, &corev1.Pod{}, func(ctx context.Context, r *admission.Request[*corev1.Pod]) admission.Verdict {
		runs++
		l.get(ctx, "config") // a read that finds nothing
		return admission.Allow()
	})
	h, reg := rechecking(admission.Fail, 2*time.Second, b)
	_, resp := post(t, h, admit.ValidatePath("mod"), "application/json", review(t, admissionv1.Create, pod(nil), nil))
	if resp == nil || !resp.Allowed {
		t.Fatalf("response %+v: want allowed", resp)
	}
	if runs != 1 || l.roundTrips() != 0 || rechecks(t, reg, "same")+rechecks(t, reg, "changed") != 0 {
		t.Fatalf("runs = %d, round trips = %d: want one run and no round trip", runs, l.roundTrips())
	}
}

func TestARecheckThatCannotCompleteIsAnsweredByTheFailurePolicy(t *testing.T) {
	for _, tc := range []struct {
		policy admission.FailurePolicy
		allow  bool
	}{{admission.Fail, false}, {admission.Ignore, true}} {
		t.Run(string(tc.policy), func(t *testing.T) {
			l := newLagging(map[string]string{"web": "exempt"}, map[string]string{})
			l.hang = true
			runs := 0
			h, _ := rechecking(tc.policy, 300*time.Millisecond, exemptOnly(l, &runs))
			began := time.Now()
			_, resp := post(t, h, admit.ValidatePath("mod"), "application/json", review(t, admissionv1.Create, pod(nil), nil))
			if d := time.Since(began); d > 2*time.Second {
				t.Fatalf("answered after %s, want within the 300ms deadline", d)
			}
			got := strings.Join(resp.Warnings, "; ")
			if resp.Result != nil {
				got += resp.Result.Message
			}
			if resp.Allowed != tc.allow || !strings.Contains(got, `binding "exempt" failed`) {
				t.Fatalf("allowed %v, answer %q: want allowed=%v by the failure policy, naming the binding", resp.Allowed, got, tc.allow)
			}
		})
	}
}

func TestAMutationThatReadAListerIsRedoneFromTheObjectAsItCame(t *testing.T) {
	l := newLagging(map[string]string{"team": "payments"}, map[string]string{"team": "shop"})
	b := admit.MutateBinding(gvk, &corev1.Pod{}, func(ctx context.Context, r *admission.Request[*corev1.Pod]) error {
		team, _ := l.get(ctx, "team")
		r.SetLabel("team", team)
		runs, _ := r.Annotation("runs")
		r.SetAnnotation("runs", runs+"x")
		return nil
	})
	h, _ := rechecking(admission.Fail, 2*time.Second, b)
	_, resp := post(t, h, admit.MutatePath("mod"), "application/json", review(t, admissionv1.Create, pod(nil), nil))
	if resp == nil || !resp.Allowed {
		t.Fatalf("response %+v: want allowed", resp)
	}
	patch := string(resp.Patch)
	if !strings.Contains(patch, `"payments"`) || strings.Contains(patch, `"shop"`) || strings.Contains(patch, `"xx"`) {
		t.Fatalf("patch %s: want the fresh team, from one run over the object as it came", patch)
	}
}

// A mutation redone after another mutation edited the object is redone
// from the object as that one left it: the earlier edit stays, the redone
// binding's first run leaves nothing.
func TestAMutationRedoneAfterAnotherKeepsTheOthersEdits(t *testing.T) {
	l := newLagging(map[string]string{"team": "payments"}, map[string]string{"team": "shop"})
	first := admit.MutateBinding(gvk, &corev1.Pod{}, func(_ context.Context, r *admission.Request[*corev1.Pod]) error {
		r.SetLabel("first", "ran")
		return nil
	})
	first.Capability, first.Name, first.Operations = "policies", "first", []admissionv1.Operation{admissionv1.Create}
	second := admit.MutateBinding(gvk, &corev1.Pod{}, func(ctx context.Context, r *admission.Request[*corev1.Pod]) error {
		team, _ := l.get(ctx, "team")
		r.SetLabel("team", team)
		runs, _ := r.Annotation("runs")
		r.SetAnnotation("runs", runs+"x")
		return nil
	})
	second.Capability, second.Name, second.Operations = "policies", "second", []admissionv1.Operation{admissionv1.Create}
	reg := prometheus.NewRegistry()
	m, err := admit.NewMetrics(reg, "mod")
	if err != nil {
		t.Fatal(err)
	}
	h := admit.NewHandler([]spec.Binding{first, second}, admit.Options{Module: "mod", Timeout: 2 * time.Second, Metrics: m, Log: logr.Discard(), Recheck: true})
	_, resp := post(t, h, admit.MutatePath("mod"), "application/json", review(t, admissionv1.Create, pod(nil), nil))
	if resp == nil || !resp.Allowed {
		t.Fatalf("response %+v: want allowed", resp)
	}
	patch := string(resp.Patch)
	if !strings.Contains(patch, `"payments"`) || strings.Contains(patch, `"shop"`) || strings.Contains(patch, `"xx"`) || !strings.Contains(patch, `"ran"`) {
		t.Fatalf("patch %s: want the first binding's label and the fresh team, from one run of the second over the object as the first left it", patch)
	}
}
