package vigil

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/gate"
	"github.com/vigilkit/vigil/internal/define"
	"github.com/vigilkit/vigil/internal/scheme"
	"github.com/vigilkit/vigil/internal/spec"
)

// Kind names an object kind known only at run time, for WaitFor, When and
// NewListerFor; it is handled as unstructured.
func Kind(group, version, kind string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: group, Version: version, Kind: kind})
	return u
}

// gateOptions are the options every gate builder has — GateBuilder,
// SetGateBuilder and SampleBuilder. Each returns the builder it is called on
// (go doc shows that as B).
type gateOptions[B any] struct {
	self B
	m    *Module
	g    *define.Gate
}

// InPhase runs the gate in phase n (0 by default): phases run in ascending
// order, one init container each.
func (o gateOptions[B]) InPhase(n int) B {
	o.m.check(1, o.g.SetPhase(n))
	return o.self
}

// Named names the gate (in logs, Events, the plan and the handoff); by default
// the name comes from the kind and the object's name.
func (o gateOptions[B]) Named(name string) B {
	o.m.check(1, o.g.SetName(name))
	return o.self
}

// Timeout bounds the wait. A required gate that times out ends its phase with
// exit code 124 (the kubelet then restarts the init container with back-off);
// use it with Optional or OnTimeout.
func (o gateOptions[B]) Timeout(d time.Duration) B {
	o.m.check(1, o.g.SetTimeout(d))
	return o.self
}

// Optional lets the phase finish without this gate when it times out.
func (o gateOptions[B]) Optional() B {
	o.g.Optional = true
	return o.self
}

// Creates declares that the gate's callback creates the object (name empty
// for any of the kind), so that `plan` can find a phase waiting for what only
// a later phase creates.
func (o gateOptions[B]) Creates(proto client.Object, namespace, name string) B {
	gvk, err := scheme.GVKOf(o.m.d.Scheme, proto)
	if err != nil {
		o.m.recordf(1, "Creates: %v", err)
		return o.self
	}
	o.g.Creates = append(o.g.Creates, spec.ObjectOf(gvk, namespace, name))
	return o.self
}

// outcome sets how the gate is done; skip frames above the caller is the
// author's call.
func (o gateOptions[B]) outcome(how string, cond gate.Cond) {
	o.m.check(2, o.g.SetOutcome(how, callSite(2), cond))
}

// callback records that how set the gate's callback; it reports whether it
// was the first.
func (o gateOptions[B]) callback(how string) bool {
	err := o.g.SetCallback(how, callSite(2))
	o.m.check(2, err)
	return err == nil
}

// GateBuilder declares a gate on one object of type T: one named object, or
// any one of those a selector picks. InPhase, Named, Timeout, Optional and
// Creates, which every gate builder has, return the builder they are called
// on.
type GateBuilder[T client.Object] struct {
	gateOptions[*GateBuilder[T]]
	proto T
	then  func(ctx context.Context, obj T, s Store) error
}

// WaitFor declares a startup gate on objects of proto's type: the module
// does not serve until it holds. proto may be a typed object registered in the
// module's scheme, or one made by Kind.
func WaitFor[T client.Object](m *Module, proto T) *GateBuilder[T] {
	g := &define.Gate{}
	b := &GateBuilder[T]{proto: proto}
	b.gateOptions = gateOptions[*GateBuilder[T]]{self: b, m: m, g: g}
	gvk, err := scheme.GVKOf(m.d.Scheme, proto)
	if err != nil {
		m.recordf(1, "WaitFor: %v", err)
	}
	g.Wait.GVK = gvk
	g.Finish = define.FinishOne(proto, &b.then)
	m.d.AddGate(g, callSite(1))
	return b
}

// WithName waits for the object of this name.
func (b *GateBuilder[T]) WithName(name string) *GateBuilder[T] {
	b.g.Wait.Name = name
	return b
}

// InNamespace looks in the namespace; by default a namespaced kind is looked
// for in all of them. A gate looks in one namespace: declare one gate per
// namespace to wait in several.
func (b *GateBuilder[T]) InNamespace(namespaces ...string) *GateBuilder[T] {
	b.m.check(1, b.g.SetNamespaces(namespaces))
	return b
}

// WithLabel selects objects that carry the label, with the value when given.
func (b *GateBuilder[T]) WithLabel(key string, value ...string) *GateBuilder[T] {
	b.m.check(1, b.g.AddLabel(key, value))
	return b
}

// WithField selects objects by a field the API server can select on, such as
// metadata.name or status.phase for Pods.
func (b *GateBuilder[T]) WithField(key, value string) *GateBuilder[T] {
	b.g.AddField(key, value)
	return b
}

// OnTimeout finishes the gate with fn's object when the timeout expires: the
// callback runs with it and it is handed off like a found one.
func (b *GateBuilder[T]) OnTimeout(fn func(ctx context.Context) (T, error)) *GateBuilder[T] {
	b.g.Fallback = define.Fallback(fn, &b.then)
	return b
}

// ToBeCreated waits until the object exists, then runs cb (which may be nil).
// A gate has one callback: cb, or Then's.
func (b *GateBuilder[T]) ToBeCreated(cb func(ctx context.Context, obj T, s Store) error) *GateBuilder[T] {
	b.outcome("ToBeCreated", gate.Created())
	if cb != nil && b.callback("ToBeCreated") {
		b.then = cb
	}
	return b
}

// ToBeDeleted waits until the object is gone: absent, or replaced by one with
// another UID.
func (b *GateBuilder[T]) ToBeDeleted() *GateBuilder[T] {
	b.outcome("ToBeDeleted", gate.Deleted())
	return b
}

// ToMatch waits until pred holds for the object.
func (b *GateBuilder[T]) ToMatch(pred func(T) bool) *GateBuilder[T] {
	b.outcome("ToMatch", define.Predicate(b.proto, pred, callSite(1)))
	return b
}

// ToBe waits until every condition holds for the object.
func (b *GateBuilder[T]) ToBe(conds ...gate.Cond) *GateBuilder[T] {
	if len(conds) == 0 {
		b.m.recordf(1, "gate %s: ToBe(): expected at least one condition, got none", b.g.ID())
	}
	b.outcome("ToBe", gate.And(conds...))
	return b
}

// Then runs cb with the object once the gate's outcome holds. A returned
// error is retried with backoff; wrap it in gate.Permanent to fail the phase.
// A gate has one callback: Then's, or ToBeCreated's.
func (b *GateBuilder[T]) Then(cb func(ctx context.Context, obj T, s Store) error) *GateBuilder[T] {
	if b.callback("Then") {
		b.then = cb
	}
	return b
}

// All turns the gate into one over every selected object.
func (b *GateBuilder[T]) All() *SetGateBuilder[T] { return b.set(spec.WaitAll, 0) }

// Any turns the gate into one over the selected objects that is done when one
// of them holds (the default of a selector).
func (b *GateBuilder[T]) Any() *SetGateBuilder[T] { return b.set(spec.WaitAny, 0) }

// AtLeast turns the gate into one that is done when n selected objects hold.
func (b *GateBuilder[T]) AtLeast(n int) *SetGateBuilder[T] {
	if n < 1 {
		b.m.recordf(1, "gate %s: AtLeast(%d): expected 1 or more", b.g.ID(), n)
	}
	return b.set(spec.WaitAtLeast, n)
}

func (b *GateBuilder[T]) set(mode spec.WaitMode, n int) *SetGateBuilder[T] {
	if b.g.Wait.Name != "" {
		b.m.recordf(2, "gate %s: All/Any/AtLeast over the single object named %q: select objects with WithLabel or WithField instead", b.g.ID(), b.g.Wait.Name)
	}
	b.g.Wait.Mode, b.g.Wait.N = mode, n
	s := &SetGateBuilder[T]{proto: b.proto}
	s.gateOptions = gateOptions[*SetGateBuilder[T]]{self: s, m: b.m, g: b.g}
	b.g.Finish = define.FinishAll(b.proto, &s.then)
	return s
}

// SetGateBuilder declares a gate over the set of objects a selector picks;
// its callbacks receive the objects that hold. InPhase, Named, Timeout,
// Optional and Creates return the builder they are called on.
type SetGateBuilder[T client.Object] struct {
	gateOptions[*SetGateBuilder[T]]
	proto T
	then  func(ctx context.Context, objs []T, s Store) error
}

// OnTimeout finishes the gate with fn's objects when the timeout expires.
func (b *SetGateBuilder[T]) OnTimeout(fn func(ctx context.Context) ([]T, error)) *SetGateBuilder[T] {
	b.g.Fallback = define.Fallback(fn, &b.then)
	return b
}

// ToBeCreated waits until the selected objects exist, then runs cb (which
// may be nil). A gate has one callback: cb, or Then's.
func (b *SetGateBuilder[T]) ToBeCreated(cb func(ctx context.Context, objs []T, s Store) error) *SetGateBuilder[T] {
	b.outcome("ToBeCreated", gate.Created())
	if cb != nil && b.callback("ToBeCreated") {
		b.then = cb
	}
	return b
}

// ToBeDeleted waits until no selected object is left.
func (b *SetGateBuilder[T]) ToBeDeleted() *SetGateBuilder[T] {
	b.outcome("ToBeDeleted", gate.Deleted())
	return b
}

// ToMatch waits until pred holds for the selected objects.
func (b *SetGateBuilder[T]) ToMatch(pred func(T) bool) *SetGateBuilder[T] {
	b.outcome("ToMatch", define.Predicate(b.proto, pred, callSite(1)))
	return b
}

// ToBe waits until every condition holds for the selected objects.
func (b *SetGateBuilder[T]) ToBe(conds ...gate.Cond) *SetGateBuilder[T] {
	if len(conds) == 0 {
		b.m.recordf(1, "gate %s: ToBe(): expected at least one condition, got none", b.g.ID())
	}
	b.outcome("ToBe", gate.And(conds...))
	return b
}

// Then runs cb with the objects that hold once the gate is done. A gate has
// one callback: Then's, or ToBeCreated's.
func (b *SetGateBuilder[T]) Then(cb func(ctx context.Context, objs []T, s Store) error) *SetGateBuilder[T] {
	if b.callback("Then") {
		b.then = cb
	}
	return b
}
