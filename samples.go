package vigil

import (
	"context"
	"time"

	"github.com/vigilkit/vigil/internal/definition/define"
)

// Interval is how often Sample samples or OnSchedule runs.
type Interval struct {
	every time.Duration
}

// Every is an interval of d.
func Every(d time.Duration) Interval { return Interval{every: d} }

// SampleBuilder declares a gate that polls a function, for what is not a
// Kubernetes object (a remote API, a file).
type SampleBuilder[S any] struct {
	m     *Module
	g     *define.Gate
	match func(S) bool
	then  func(ctx context.Context, sample S, s Store) error
}

// Sample declares a startup gate that calls fn every interval until its result
// matches: the first sample at once, later ones with jitter, each bounded by
// the sample timeout (the interval, by default), and errors backed off.
func Sample[S any](m *Module, fn func(ctx context.Context) (S, error), every Interval) *SampleBuilder[S] {
	b := &SampleBuilder[S]{m: m}
	b.g = define.NewSampleGate(m.d, every.every, fn, define.Caller(), &b.match, &b.then)
	return b
}

// ToMatch waits until pred holds for a sample.
func (b *SampleBuilder[S]) ToMatch(pred func(S) bool) *SampleBuilder[S] {
	b.m.d.Outcome(b.g, define.Caller(), "ToMatch", nil)
	b.match = pred
	return b
}

// Then runs cb with the matching sample. A gate has one callback.
func (b *SampleBuilder[S]) Then(cb func(ctx context.Context, sample S, s Store) error) *SampleBuilder[S] {
	if b.m.d.Callback(b.g, define.Caller(), "Then") {
		b.then = cb
	}
	return b
}

// SampleTimeout bounds each call of the sampled function.
func (b *SampleBuilder[S]) SampleTimeout(d time.Duration) *SampleBuilder[S] {
	b.m.d.Check(define.Caller(), b.g.SetSampleTimeout(d))
	return b
}

// OnTimeout finishes the gate with fn's sample when the timeout expires.
func (b *SampleBuilder[S]) OnTimeout(fn func(ctx context.Context) (S, error)) *SampleBuilder[S] {
	b.g.Fallback = define.Fallback(fn, &b.then)
	return b
}
