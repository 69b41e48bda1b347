package vigil

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/gate"
	"github.com/vigilkit/vigil/internal/define"
	"github.com/vigilkit/vigil/internal/scheme"
	"github.com/vigilkit/vigil/internal/spec"
)

// Kind names an object kind known only at run time, for WaitFor, When, Watch
// and NewLister; it is handled as unstructured.
func Kind(group, version, kind string) *unstructured.Unstructured {
	return define.Kind(group, version, kind)
}

// KindWithPlural is Kind for a kind whose resource — the plural its CRD
// names, as in `kubectl get clusterconfig` — is not the one Kubernetes
// guesses from the kind (clusterconfigs): the RBAC rules, webhook rules and
// admission policies vigil derives then name that resource. A plural that
// is not a lowercase resource name panics at definition, naming the call.
//
//	clusterConfig := vigil.KindWithPlural("uds.dev", "v1alpha1", "ClusterConfig", "clusterconfig")
func KindWithPlural(group, version, kind, plural string) *unstructured.Unstructured {
	if errs := validation.IsDNS1123Label(plural); len(errs) > 0 {
		panic(fmt.Sprintf("%s: vigil.KindWithPlural(%q, %q, %q, %q): the plural: expected a lowercase resource name, as the CRD's spec.names.plural: %s",
			define.Caller(), group, version, kind, plural, strings.Join(errs, "; ")))
	}
	spec.SetPlural(schema.GroupKind{Group: group, Kind: kind}, plural)
	return define.Kind(group, version, kind)
}

// gateOptions are the options every gate builder has; each returns the
// builder it is called on (B).
type gateOptions[B any] struct {
	self B
	m    *Module
	g    *define.Gate
}

// InPhase runs the gate in phase n (0 by default): phases run in ascending
// order, one init container each.
func (o gateOptions[B]) InPhase(n int) B {
	o.m.d.Check(define.Caller(), o.g.SetPhase(n))
	return o.self
}

// Named names the gate (in logs, Events, the plan and the handoff); by default
// the name comes from the kind and the object's name.
func (o gateOptions[B]) Named(name string) B {
	o.m.d.Check(define.Caller(), o.g.SetName(name))
	return o.self
}

// Timeout bounds the wait: a required gate that times out ends its phase with
// exit code 124; use it with Optional or OnTimeout.
func (o gateOptions[B]) Timeout(d time.Duration) B {
	o.m.d.Check(define.Caller(), o.g.SetTimeout(d))
	return o.self
}

// Optional lets the phase finish without this gate when it times out.
func (o gateOptions[B]) Optional() B { o.g.Optional = true; return o.self }

// Creates declares that the gate's callback creates the object (name empty for
// any), so `plan` finds a phase waiting for what only a later phase creates.
func (o gateOptions[B]) Creates(proto client.Object, namespace, name string) B {
	o.m.d.Check(define.Caller(), o.g.AddCreates(o.m.d.Scheme, proto, namespace, name))
	return o.self
}

// outcome sets how the gate is done, declared at site.
func (o gateOptions[B]) outcome(site, how string, cond gate.Cond) {
	o.m.d.Check(site, o.g.SetOutcome(how, site, cond))
}

// callback records that how, at site, set the callback; false if one was set.
func (o gateOptions[B]) callback(site, how string) bool {
	err := o.g.SetCallback(how, site)
	o.m.d.Check(site, err)
	return err == nil
}

// objectOptions are what both object gate builders have: the outcome (one
// of ToBeCreated, ToBeGone, ToMatch, ToBe), the one callback (ToBeCreated's
// or Then's) and OnTimeout. A is what the callback receives: the object for
// a GateBuilder, the selected objects that hold for a SetGateBuilder.
type objectOptions[T client.Object, A, B any] struct {
	gateOptions[B]
	proto T
	then  func(ctx context.Context, a A, s Store) error
}

// OnTimeout finishes the gate with fn's result when the timeout expires: the
// callback runs with it and it is handed off like a found one.
func (o *objectOptions[T, A, B]) OnTimeout(fn func(ctx context.Context) (A, error)) B {
	o.g.Fallback = define.Fallback(fn, &o.then)
	return o.self
}

// ToBeCreated waits until the object (or the selected objects) exists, then
// runs cb (which may be nil). A gate has one callback: cb, or Then's.
func (o *objectOptions[T, A, B]) ToBeCreated(cb func(ctx context.Context, a A, s Store) error) B {
	site := define.Caller()
	o.outcome(site, "ToBeCreated", gate.Created())
	if cb != nil && o.callback(site, "ToBeCreated") {
		o.then = cb
	}
	return o.self
}

// ToBeGone waits until the object is gone — absent, or replaced by one with
// another UID — or, over a selection, until no selected object is left.
func (o *objectOptions[T, A, B]) ToBeGone() B {
	o.outcome(define.Caller(), "ToBeGone", gate.Gone())
	return o.self
}

// ToMatch waits until pred holds for the object (or the selected objects).
func (o *objectOptions[T, A, B]) ToMatch(pred func(T) bool) B {
	site := define.Caller()
	o.outcome(site, "ToMatch", define.Predicate(o.proto, pred, site))
	return o.self
}

// ToBe waits until every condition holds for the object (or the selected
// objects).
func (o *objectOptions[T, A, B]) ToBe(conds ...gate.Cond) B {
	site := define.Caller()
	o.m.d.Check(site, o.g.CheckConds(len(conds)))
	o.outcome(site, "ToBe", gate.And(conds...))
	return o.self
}

// Then runs cb once the gate's outcome holds, with the object (or the
// selected objects that hold). A returned error is retried with backoff;
// wrap it in gate.Permanent to fail the phase. A gate has one callback:
// Then's, or ToBeCreated's.
func (o *objectOptions[T, A, B]) Then(cb func(ctx context.Context, a A, s Store) error) B {
	if o.callback(define.Caller(), "Then") {
		o.then = cb
	}
	return o.self
}

// GateBuilder declares a gate on one object of type T: one named object, or
// any one of those a selector picks. Every option returns the builder it is
// called on.
type GateBuilder[T client.Object] struct {
	objectOptions[T, T, *GateBuilder[T]]
}

// WaitFor declares a startup gate on objects of proto's type: the module
// does not serve until it holds. proto may be a typed object registered in the
// module's scheme, or one made by Kind.
func WaitFor[T client.Object](m *Module, proto T) *GateBuilder[T] {
	site := define.Caller()
	g := &define.Gate{}
	b := &GateBuilder[T]{}
	b.objectOptions = objectOptions[T, T, *GateBuilder[T]]{gateOptions: gateOptions[*GateBuilder[T]]{self: b, m: m, g: g}, proto: proto}
	gvk, err := scheme.GVKOf(m.d.Scheme, proto)
	if err != nil {
		m.d.Recordf(site, "WaitFor: %v", err)
	}
	g.Wait.GVK = gvk
	g.Finish = define.FinishOne(proto, &b.then)
	m.d.AddGate(g, site)
	return b
}

// WithName waits for the object of this name.
func (b *GateBuilder[T]) WithName(name string) *GateBuilder[T] { b.g.Wait.Name = name; return b }

// InNamespace looks in the namespace; by default a namespaced kind is looked
// for in all of them. A gate looks in one namespace: declare one gate per
// namespace to wait in several.
func (b *GateBuilder[T]) InNamespace(namespace string) *GateBuilder[T] {
	b.m.d.Check(define.Caller(), b.g.SetNamespace(namespace))
	return b
}

// WithLabel selects objects that have the label.
func (b *GateBuilder[T]) WithLabel(key string) *GateBuilder[T] {
	b.m.d.Check(define.Caller(), b.g.AddLabel("WithLabel", key, nil))
	return b
}

// WithLabelValue selects objects with the label set to value.
func (b *GateBuilder[T]) WithLabelValue(key, value string) *GateBuilder[T] {
	b.m.d.Check(define.Caller(), b.g.AddLabel("WithLabelValue", key, &value))
	return b
}

// WithField selects objects by a field the API server can select on, such as
// metadata.name or status.phase for Pods.
func (b *GateBuilder[T]) WithField(key, value string) *GateBuilder[T] {
	b.g.AddField(key, value)
	return b
}

// All turns the gate into one over every selected object.
func (b *GateBuilder[T]) All() *SetGateBuilder[T] { return b.set(define.Caller(), spec.WaitAll, 0) }

// Any turns the gate into one over the selected objects that is done when one
// of them holds (the default of a selector).
func (b *GateBuilder[T]) Any() *SetGateBuilder[T] { return b.set(define.Caller(), spec.WaitAny, 0) }

// AtLeast turns the gate into one that is done when n selected objects hold.
func (b *GateBuilder[T]) AtLeast(n int) *SetGateBuilder[T] {
	site := define.Caller()
	b.m.d.Check(site, b.g.CheckAtLeast(n))
	return b.set(site, spec.WaitAtLeast, n)
}

func (b *GateBuilder[T]) set(site string, mode spec.WaitMode, n int) *SetGateBuilder[T] {
	b.m.d.Check(site, b.g.SetMode(mode, n))
	s := &SetGateBuilder[T]{}
	s.objectOptions = objectOptions[T, []T, *SetGateBuilder[T]]{gateOptions: gateOptions[*SetGateBuilder[T]]{self: s, m: b.m, g: b.g}, proto: b.proto}
	b.g.Finish = define.FinishAll(b.proto, &s.then)
	return s
}

// SetGateBuilder declares a gate over the set of objects a selector picks;
// its callbacks receive the objects that hold. Every option returns the
// builder it is called on.
type SetGateBuilder[T client.Object] struct {
	objectOptions[T, []T, *SetGateBuilder[T]]
}

// CRDs declares the CustomResourceDefinitions the module ships — its own
// kinds — from YAML, one or more documents: embed the files controller-gen
// writes from the module's Go types (go:embed crds/*.yaml). `manifests`
// renders them, before the pods, and the chart carries them in crds/; plan
// lists them, and a gate waiting for one (WaitFor(m,
// &apiextensionsv1.CustomResourceDefinition{}).WithName(...)) waits for
// what the module's own install applies.
func CRDs(m *Module, yaml []byte) {
	m.d.AddCRDs(define.Caller(), yaml)
}
