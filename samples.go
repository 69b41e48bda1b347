package vigil

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/gate"
)

// Interval is how often something is done.
type Interval struct {
	every time.Duration
}

// Every is an interval of d.
func Every(d time.Duration) Interval { return Interval{every: d} }

// sampleDef is the sampling half of a Sample gate.
type sampleDef struct {
	every         time.Duration
	sampleTimeout time.Duration
	// run samples until match holds, reporting what it saw, runs the
	// callback and returns the matching sample.
	run func(ctx context.Context, seen func(found bool, what string), s Store) (any, error)
}

// SampleBuilder declares a gate that polls a function rather than watching
// objects: for what is not a Kubernetes object, such as a remote API or a file.
type SampleBuilder[S any] struct {
	m     *Module
	g     *gateDef
	match func(S) bool
	then  func(ctx context.Context, sample S, s Store) error
}

// Sample declares a startup gate that calls fn every interval until its result
// matches: the first sample at once, later ones with jitter, each bounded by
// the sample timeout (the interval, by default), and errors backed off.
func Sample[S any](m *Module, fn func(ctx context.Context) (S, error), every Interval) *SampleBuilder[S] {
	g := &gateDef{}
	b := &SampleBuilder[S]{m: m, g: g}
	if every.every <= 0 {
		m.recordf(1, "Sample: Every(%s): expected a positive interval", every.every)
		every.every = time.Second
	}
	g.sample = &sampleDef{every: every.every, sampleTimeout: every.every}
	g.sample.run = func(ctx context.Context, seen func(found bool, what string), s Store) (any, error) {
		v, err := runSample(ctx, fn, b.match, g.sample, seen)
		if err != nil {
			return nil, err
		}
		return v, b.runThen(ctx, v, s)
	}
	m.addGate(g)
	return b
}

func runSample[S any](ctx context.Context, fn func(context.Context) (S, error), match func(S) bool, def *sampleDef, seen func(found bool, what string)) (S, error) {
	var zero S
	failures := 0
	for {
		sctx, cancel := context.WithTimeout(ctx, def.sampleTimeout)
		v, err := fn(sctx)
		cancel()
		wait := def.every
		switch {
		case gate.IsPermanent(err):
			return zero, err
		case err != nil:
			failures++
			seen(false, "sample failed: "+err.Error())
			// Back off: twice the interval per failure in a row, at most ten intervals.
			wait = def.every * time.Duration(min(1<<min(failures, 4), 10))
		case match == nil || match(v):
			return v, nil
		default:
			failures = 0
			seen(true, fmt.Sprintf("sample %s, not matching", truncate(fmt.Sprintf("%+v", v), 120)))
		}
		// Jitter of up to a tenth keeps replicas from sampling in lockstep.
		wait += time.Duration(rand.Int64N(int64(wait)/10 + 1))
		select {
		case <-ctx.Done():
			return zero, context.Cause(ctx)
		case <-time.After(wait):
		}
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// ToMatch waits until pred holds for a sample.
func (b *SampleBuilder[S]) ToMatch(pred func(S) bool) *SampleBuilder[S] {
	b.g.setOutcome(b.m, "ToMatch", nil)
	b.match = pred
	return b
}

// Then runs cb with the matching sample.
func (b *SampleBuilder[S]) Then(cb func(ctx context.Context, sample S, s Store) error) *SampleBuilder[S] {
	b.then = cb
	return b
}

// SampleTimeout bounds each call of the sampled function.
func (b *SampleBuilder[S]) SampleTimeout(d time.Duration) *SampleBuilder[S] {
	if d <= 0 {
		b.m.recordf(1, "gate %s: SampleTimeout(%s): expected a positive duration", b.g.id(), d)
		return b
	}
	b.g.sample.sampleTimeout = d
	return b
}

// InPhase: see GateBuilder.InPhase.
func (b *SampleBuilder[S]) InPhase(n int) *SampleBuilder[S] { setPhase(b.m, b.g, n); return b }

// Named: see GateBuilder.Named.
func (b *SampleBuilder[S]) Named(name string) *SampleBuilder[S] { setName(b.m, b.g, name); return b }

// Timeout: see GateBuilder.Timeout.
func (b *SampleBuilder[S]) Timeout(d time.Duration) *SampleBuilder[S] {
	setTimeout(b.m, b.g, d)
	return b
}

// Optional: see GateBuilder.Optional.
func (b *SampleBuilder[S]) Optional() *SampleBuilder[S] { b.g.optional = true; return b }

// Creates declares that the gate's callback creates the object: see
// GateBuilder.Creates.
func (b *SampleBuilder[S]) Creates(proto client.Object, namespace, name string) *SampleBuilder[S] {
	addCreates(b.m, b.g, proto, namespace, name)
	return b
}

// OnTimeout finishes the gate with fn's sample when the timeout expires.
func (b *SampleBuilder[S]) OnTimeout(fn func(ctx context.Context) (S, error)) *SampleBuilder[S] {
	b.g.fallback = func(ctx context.Context, s Store) (any, error) {
		v, err := fn(ctx)
		if err != nil {
			return nil, err
		}
		return v, b.runThen(ctx, v, s)
	}
	return b
}

func (b *SampleBuilder[S]) runThen(ctx context.Context, v S, s Store) error {
	if b.then == nil {
		return nil
	}
	return b.then(ctx, v, s)
}
