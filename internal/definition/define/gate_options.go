package define

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/gate"
	"github.com/vigilkit/vigil/internal/definition/scheme"
	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/runtime/progress"
	"github.com/vigilkit/vigil/store"
)

// CheckConds checks ToBe's n conditions.
func (g *Gate) CheckConds(n int) error {
	if n == 0 {
		return fmt.Errorf("gate %s: ToBe(): expected at least one condition, got none", g.ID())
	}
	return nil
}

// CheckAtLeast checks AtLeast's n.
func (g *Gate) CheckAtLeast(n int) error {
	if n < 1 {
		return fmt.Errorf("gate %s: AtLeast(%d): expected 1 or more", g.ID(), n)
	}
	return nil
}

// SetMode turns the gate into one over a set of objects (All, Any,
// AtLeast n), which a gate on one named object cannot be.
func (g *Gate) SetMode(mode spec.WaitMode, n int) error {
	g.Wait.Mode, g.Wait.N = mode, n
	if g.Wait.Name != "" {
		return fmt.Errorf("gate %s: All/Any/AtLeast over the single object named %q: select objects with WithLabel or WithField instead", g.ID(), g.Wait.Name)
	}
	return nil
}

// AddCreates records that the gate's callback creates an object of proto's
// kind (name empty for any).
func (g *Gate) AddCreates(s *runtime.Scheme, proto client.Object, namespace, name string) error {
	gvk, err := scheme.GVKOf(s, proto)
	if err != nil {
		//lint:ignore ST1005 the message starts with the method the author called, as every definition mistake does
		return fmt.Errorf("Creates: %v", err)
	}
	g.Creates = append(g.Creates, spec.ObjectOf(gvk, namespace, name))
	return nil
}

// NewSample is the sampling of a Sample gate: fn every interval (a second
// when every is not positive, a mistake) until *match holds, then *then with
// the matching sample.
func NewSample[S any](every time.Duration, fn func(context.Context) (S, error), match *func(S) bool, then *func(context.Context, S, store.Store) error) (*Sample, error) {
	var err error
	if every <= 0 {
		err = fmt.Errorf("Sample: Every(%s): expected a positive interval", every)
		every = time.Second
	}
	smp := &Sample{Every: every, SampleTimeout: every}
	smp.Run = func(ctx context.Context, seen func(found bool, what string), s store.Store) (any, error) {
		v, err := RunSample(ctx, fn, *match, smp, seen)
		if err != nil {
			return nil, err
		}
		if *then != nil {
			done := progress.CallbackRunning(ctx)
			err = (*then)(ctx, v, s)
			done()
		}
		return v, err
	}
	return smp, err
}

// SetSampleTimeout bounds each call of a sample gate's function.
func (g *Gate) SetSampleTimeout(d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("gate %s: SampleTimeout(%s): expected a positive duration", g.ID(), d)
	}
	g.Sample.SampleTimeout = d
	return nil
}

// NewWaitGate declares, at site, a gate waiting for an object of proto's
// kind, whose callback is then's: the gate its builder refines.
func NewWaitGate[T client.Object](m *Module, proto T, site string, then *func(context.Context, T, store.Store) error) *Gate {
	g := &Gate{}
	gvk, err := m.GVKOf(site, proto)
	if err != nil {
		m.Recordf(site, "WaitFor: %v", err)
	}
	g.Wait.GVK = gvk
	g.Finish = FinishOne(proto, then)
	m.AddGate(g, site)
	return g
}

// NewSampleGate declares, at site, a gate sampling fn every interval,
// matched by match and whose callback is then's.
func NewSampleGate[S any](m *Module, every time.Duration, fn func(context.Context) (S, error), site string, match *func(S) bool, then *func(context.Context, S, store.Store) error) *Gate {
	g := &Gate{}
	var err error
	g.Sample, err = NewSample(every, fn, match, then)
	m.Check(site, err)
	m.AddGate(g, site)
	return g
}

// Outcome sets how the gate g is done, declared at site by how.
func (m *Module) Outcome(g *Gate, site, how string, cond gate.Cond) {
	m.Check(site, g.SetOutcome(how, site, cond))
}

// Callback records that how, at site, set g's callback; false if one was
// set already, a mistake recorded at site.
func (m *Module) Callback(g *Gate, site, how string) bool {
	err := g.SetCallback(how, site)
	m.Check(site, err)
	return err == nil
}
