package admit

import (
	"context"
	"errors"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/runtime/callctx"
	"github.com/vigilkit/vigil/internal/serving/fresh"
)

// freshSource is a barrier's source whose cache has caught up at once, or
// whose API server cannot be read (err).
type freshSource struct{ err error }

func (s freshSource) Latest(context.Context, fresh.Scope) (fresh.Snapshot, error) {
	return fresh.Snapshot{}, s.err
}
func (freshSource) Caught(fresh.Snapshot) (bool, error) { return true, nil }
func (freshSource) Changed() <-chan struct{}            { return make(chan struct{}) }

func TestRecheckedDecidesWhichDecisionsAreMadeAgain(t *testing.T) {
	barrier := fresh.NewBarrier("ConfigMap", freshSource{})
	reads := func(notes ...func(*fresh.Reads)) *fresh.Reads {
		r := &fresh.Reads{}
		for _, n := range notes {
			n(r)
		}
		return r
	}
	found := func(r *fresh.Reads) { r.Note(barrier, fresh.Scope{}, true) }
	missed := func(r *fresh.Reads) { r.Note(barrier, fresh.Scope{}, false) }
	unbarred := func(r *fresh.Reads) { r.Note(nil, fresh.Scope{}, true) } // a lister without a barrier
	for _, c := range []struct {
		name    string
		reads   *fresh.Reads
		refused bool
		want    bool
	}{
		{"no recheck", nil, true, false},
		{"no lister read, refused", reads(), true, false},
		{"no lister read, allowed", reads(), false, false},
		{"read a lister, refused", reads(missed), true, true},
		{"read a lister and found, allowed", reads(found), false, true},
		{"read a lister and found nothing, allowed", reads(missed), false, false},
		{"read a lister without a barrier, refused", reads(unbarred), true, false},
		{"read a lister without a barrier and found, allowed", reads(unbarred), false, false},
	} {
		if got := rechecked(c.reads, c.refused); got != c.want {
			t.Errorf("%s: rechecked = %v, want %v", c.name, got, c.want)
		}
	}
}

// readingBinding is a validation whose verdicts, one per run, come from
// verdicts in turn; each run reads a lister of barrier, finding nothing.
func readingBinding(barrier *fresh.Barrier, runs *int, verdicts ...admission.Verdict) *spec.Binding {
	b := stageBinding("exempt", "check", spec.Enforce)
	b.Validate = func(ctx context.Context, _, _ client.Object, _ *spec.Call) (admission.Verdict, error) {
		callctx.Reads(ctx).Note(barrier, fresh.Scope{}, false)
		v := verdicts[min(*runs, len(verdicts)-1)]
		*runs++
		return v, nil
	}
	return b
}

func TestADenialOnListerReadsIsMadeAgainOnceTheyAreFresh(t *testing.T) {
	h, reg, _ := stageHandler(t, Options{Recheck: true})
	barrier := fresh.NewBarrier("ConfigMap", freshSource{})
	rv := &reviewRun{h: h, req: stageRequest()}

	runs := 0
	v, err := rv.validateOne(context.Background(), readingBinding(barrier, &runs, admission.Deny("stale"), admission.Allow()), nil, nil)
	if err != nil || !v.Allowed() || runs != 2 {
		t.Errorf("stale denial: verdict allowed %v, err %v, %d runs; want the fresh allow after 2 runs", v.Allowed(), err, runs)
	}
	if n, _, _ := sample(t, reg, "vigil_admission_rechecks_total", map[string]string{"capability": "exempt", "binding": "check", "outcome": "changed"}); n != 1 {
		t.Errorf("rechecks changed = %v, want 1", n)
	}

	runs = 0
	v, err = rv.validateOne(context.Background(), readingBinding(barrier, &runs, admission.Deny("still"), admission.Deny("still")), nil, nil)
	if err != nil || v.Allowed() || v.Message() != "still" || runs != 2 {
		t.Errorf("fresh denial: verdict %+v, err %v, %d runs; want the denial after 2 runs", v, err, runs)
	}
	if n, _, _ := sample(t, reg, "vigil_admission_rechecks_total", map[string]string{"capability": "exempt", "binding": "check", "outcome": "same"}); n != 1 {
		t.Errorf("rechecks same = %v, want 1", n)
	}

	runs = 0
	if v, err = rv.validateOne(context.Background(), readingBinding(barrier, &runs, admission.Allow()), nil, nil); err != nil || !v.Allowed() || runs != 1 {
		t.Errorf("allow that found nothing: allowed %v, err %v, %d runs; want it to stand after 1 run", v.Allowed(), err, runs)
	}
}

func TestARecheckWhoseListersCannotBeConfirmedFreshFails(t *testing.T) {
	h, reg, _ := stageHandler(t, Options{Recheck: true})
	barrier := fresh.NewBarrier("ConfigMap", freshSource{err: errors.New("apiserver unreachable")})
	rv := &reviewRun{h: h, req: stageRequest()}
	runs := 0
	_, err := rv.validateOne(context.Background(), readingBinding(barrier, &runs, admission.Deny("stale"), admission.Allow()), nil, nil)
	if err == nil || !strings.HasPrefix(err.Error(), "the decision rests on cached data that could not be confirmed fresh: ") || !strings.Contains(err.Error(), "apiserver unreachable") {
		t.Errorf("err = %v, want that the data could not be confirmed fresh, and why", err)
	}
	if runs != 1 {
		t.Errorf("%d runs, want 1: no second decision on unconfirmed data", runs)
	}
	if n, _, _ := sample(t, reg, "vigil_admission_rechecks_total", map[string]string{"capability": "exempt", "binding": "check", "outcome": "failed"}); n != 1 {
		t.Errorf("rechecks failed = %v, want 1", n)
	}
}

func TestWithoutRecheckNothingIsMadeAgain(t *testing.T) {
	h, _, _ := stageHandler(t, Options{})
	barrier := fresh.NewBarrier("ConfigMap", freshSource{})
	rv := &reviewRun{h: h, req: stageRequest()}
	if rv.input(context.Background(), stageBinding("exempt", "check", spec.Enforce)).reads != nil {
		t.Fatal("a handler without Recheck records lister reads")
	}
	runs := 0
	v, err := rv.validateOne(context.Background(), readingBinding(barrier, &runs, admission.Deny("stale"), admission.Allow()), nil, nil)
	if err != nil || v.Allowed() || runs != 1 {
		t.Errorf("verdict allowed %v, err %v, %d runs; want the first denial, 1 run", v.Allowed(), err, runs)
	}
}

// One record of lister reads serves a request's bindings, emptied before
// each: a binding that read nothing is not made again because the one
// before it read a lister.
func TestABindingIsRecheckedForItsOwnReadsOnly(t *testing.T) {
	h, reg, _ := stageHandler(t, Options{Recheck: true})
	barrier := fresh.NewBarrier("ConfigMap", freshSource{})
	rv := &reviewRun{h: h, req: stageRequest()}

	runs := 0
	if v, err := rv.validateOne(context.Background(), readingBinding(barrier, &runs, admission.Deny("stale"), admission.Allow()), nil, nil); err != nil || !v.Allowed() {
		t.Fatalf("the reading binding: allowed %v, err %v; want the fresh allow", v.Allowed(), err)
	}
	plain := stageBinding("exempt", "plain", spec.Enforce)
	plainRuns := 0
	plain.Validate = func(context.Context, client.Object, client.Object, *spec.Call) (admission.Verdict, error) {
		plainRuns++
		return admission.Deny("no"), nil
	}
	v, err := rv.validateOne(context.Background(), plain, nil, nil)
	if err != nil || v.Allowed() || plainRuns != 1 {
		t.Errorf("the binding that read nothing: allowed %v, err %v, %d runs; want its denial after 1 run", v.Allowed(), err, plainRuns)
	}
	if n, _, _ := sample(t, reg, "vigil_admission_rechecks_total", map[string]string{"capability": "exempt", "binding": "plain"}); n != 0 {
		t.Errorf("rechecks of the binding that read nothing = %v, want 0", n)
	}
}
