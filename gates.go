package vigil

import (
	"context"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/gate"
	"github.com/vigilkit/vigil/internal/scheme"
	"github.com/vigilkit/vigil/internal/spec"
	"github.com/vigilkit/vigil/internal/waitfor"
)

// Kind names an object kind known only at run time, for WaitFor; it is
// handled as unstructured.
func Kind(group, version, kind string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: group, Version: version, Kind: kind})
	return u
}

// gateDef is a gate as declared, whatever its type parameters.
type gateDef struct {
	site     string
	index    int    // declaration order in the module
	name     string // set by Named; see id
	phase    int
	timeout  time.Duration
	optional bool

	// An object gate waits on spec; a sample gate samples.
	spec      waitfor.Spec
	labelReqs []labels.Requirement
	fieldSet  fields.Set
	sample    *sampleDef

	creates []createdObject

	outcome     string // how the gate was completed, e.g. "ToBe"; empty until then
	outcomeSite string
	// finish turns what the wait found into the handoff result, running the
	// author's callback.
	finish func(ctx context.Context, objs []*unstructured.Unstructured, s Store) (any, error)
	// fallback produces the result when the timeout expires; nil when none.
	fallback func(ctx context.Context, s Store) (any, error)
}

func (g *gateDef) setOutcome(m *Module, how string, cond gate.Cond) {
	if g.outcome != "" {
		m.recordf(2, "gate %s: %s after %s (%s): a gate has one outcome; declare another gate for another one", g.id(), how, g.outcome, g.outcomeSite)
		return
	}
	g.outcome, g.outcomeSite = how, callSite(2)
	if cond == nil {
		return
	}
	if v, ok := cond.(gate.Validator); ok && g.sample == nil {
		if err := v.Validate(g.spec.GVK); err != nil {
			m.recordf(2, "gate %s: %v", g.id(), err)
		}
	}
	g.spec.Cond = cond
}

// resolve is the gate as every role and tool reads it.
func (g *gateDef) resolve() spec.Gate {
	sg := spec.Gate{
		Name: g.id(), Phase: g.phase, WaitsFor: g.describe(), Timeout: g.timeout,
		Optional: g.optional, Fallback: g.fallback != nil, Site: g.site, OnTimeout: g.fallback,
	}
	for _, c := range g.creates {
		sg.Creates = append(sg.Creates, spec.ObjectOf(c.gvk, c.namespace, c.name))
	}
	if g.sample != nil {
		sg.Sample = g.sample.run
		return sg
	}
	sg.Wait = g.waitSpec()
	waits := spec.ObjectOf(sg.Wait.GVK, sg.Wait.Namespace, sg.Wait.Name)
	if sg.Wait.Labels != nil {
		waits.Labels = sg.Wait.Labels.String()
	}
	sg.Waits = &waits
	sg.Finish = g.finish
	return sg
}

// describe says what the gate waits for.
func (g *gateDef) describe() string {
	if g.sample != nil {
		return fmt.Sprintf("a sample every %s to match", g.sample.every)
	}
	return g.waitSpec().Describe()
}

// waitSpec is the spec the engine runs.
func (g *gateDef) waitSpec() waitfor.Spec {
	s := g.spec
	if len(g.labelReqs) > 0 {
		s.Labels = labels.NewSelector().Add(g.labelReqs...)
	}
	if len(g.fieldSet) > 0 {
		s.Fields = fields.SelectorFromSet(g.fieldSet)
	}
	return s
}

var unsafeName = regexp.MustCompile(`[^a-z0-9.-]+`)

// id is the gate's name: the one it was given, or one derived from its kind
// and object name (or its place among the module's gates).
func (g *gateDef) id() string {
	if g.name != "" {
		return g.name
	}
	base := "sample"
	if g.sample == nil {
		base = strings.ToLower(g.spec.GVK.Kind)
	}
	if g.spec.Name != "" {
		base += "-" + g.spec.Name
	} else {
		base += fmt.Sprintf("-%d", g.index)
	}
	return strings.Trim(unsafeName.ReplaceAllString(strings.ToLower(base), "-"), "-.")
}

// addGate records a new gate declared at the caller's caller.
func (m *Module) addGate(g *gateDef) {
	g.site = callSite(2)
	m.mu.Lock()
	g.index = len(m.gates)
	m.gates = append(m.gates, g)
	m.mu.Unlock()
}

// GateBuilder declares a gate on one object of type T: one named object, or
// any one of those a selector picks.
type GateBuilder[T client.Object] struct {
	m        *Module
	g        *gateDef
	proto    T
	then     func(ctx context.Context, obj T, s Store) error
	fallback func(ctx context.Context) (T, error)
}

// WaitFor declares a startup gate on objects of proto's type: the module
// does not serve until it holds. proto may be a typed object registered in the
// module's scheme, or one made by Kind.
func WaitFor[T client.Object](m *Module, proto T) *GateBuilder[T] {
	g := &gateDef{}
	b := &GateBuilder[T]{m: m, g: g, proto: proto}
	gvk, err := scheme.GVKOf(m.scheme, proto)
	if err != nil {
		m.recordf(1, "WaitFor: %v", err)
	}
	g.spec.GVK = gvk
	g.finish = func(ctx context.Context, objs []*unstructured.Unstructured, s Store) (any, error) {
		var obj T
		if len(objs) > 0 {
			var err error
			if obj, err = convert(proto, objs[0]); err != nil {
				return nil, gate.Permanent(err)
			}
		}
		if b.then != nil {
			if err := b.then(ctx, obj, s); err != nil {
				return nil, err
			}
		}
		if len(objs) == 0 {
			return nil, nil
		}
		return obj, nil
	}
	m.addGate(g)
	return b
}

// WithName waits for the object of this name.
func (b *GateBuilder[T]) WithName(name string) *GateBuilder[T] {
	b.g.spec.Name = name
	return b
}

// InNamespace looks in one namespace; by default a namespaced kind is looked
// for in all of them.
func (b *GateBuilder[T]) InNamespace(ns string) *GateBuilder[T] {
	if problems := validation.IsDNS1123Label(ns); len(problems) > 0 {
		b.m.recordf(1, "gate %s: InNamespace(%q): not a namespace name: %s", b.g.id(), ns, strings.Join(problems, "; "))
	}
	b.g.spec.Namespace = ns
	return b
}

// WithLabel selects objects that carry the label, with the value when given.
func (b *GateBuilder[T]) WithLabel(key string, value ...string) *GateBuilder[T] {
	addLabel(b.m, b.g, key, value)
	return b
}

// WithField selects objects by a field the API server can select on, such as
// metadata.name or status.phase for Pods.
func (b *GateBuilder[T]) WithField(key, value string) *GateBuilder[T] {
	if b.g.fieldSet == nil {
		b.g.fieldSet = fields.Set{}
	}
	b.g.fieldSet[key] = value
	return b
}

// InPhase runs the gate in phase n (0 by default): phases run in ascending
// order, one init container each.
func (b *GateBuilder[T]) InPhase(n int) *GateBuilder[T] { setPhase(b.m, b.g, n); return b }

// Named names the gate (in logs, Events, the plan and the handoff); by default
// the name comes from the kind and the object's name.
func (b *GateBuilder[T]) Named(name string) *GateBuilder[T] { setName(b.m, b.g, name); return b }

// Timeout bounds the wait. A required gate that times out ends its phase with
// exit code 124 (the kubelet then restarts the init container with back-off);
// use it with Optional or OnTimeout.
func (b *GateBuilder[T]) Timeout(d time.Duration) *GateBuilder[T] { setTimeout(b.m, b.g, d); return b }

// Optional lets the phase finish without this gate when it times out.
func (b *GateBuilder[T]) Optional() *GateBuilder[T] { b.g.optional = true; return b }

// Creates declares that the gate's callback creates the object (name empty
// for any of the kind), so that `plan` can find a phase waiting for what only
// a later phase creates.
func (b *GateBuilder[T]) Creates(proto client.Object, namespace, name string) *GateBuilder[T] {
	addCreates(b.m, b.g, proto, namespace, name)
	return b
}

// OnTimeout finishes the gate with fn's object when the timeout expires: the
// callback runs with it and it is handed off like a found one.
func (b *GateBuilder[T]) OnTimeout(fn func(ctx context.Context) (T, error)) *GateBuilder[T] {
	b.fallback = fn
	b.g.fallback = func(ctx context.Context, s Store) (any, error) {
		obj, err := fn(ctx)
		if err != nil {
			return nil, err
		}
		if b.then != nil {
			if err := b.then(ctx, obj, s); err != nil {
				return nil, err
			}
		}
		return obj, nil
	}
	return b
}

// ToBeCreated waits until the object exists, then runs cb (which may be nil).
func (b *GateBuilder[T]) ToBeCreated(cb func(ctx context.Context, obj T, s Store) error) *GateBuilder[T] {
	b.g.setOutcome(b.m, "ToBeCreated", gate.Created())
	b.then = cb
	return b
}

// ToBeDeleted waits until the object is gone: absent, or replaced by one with
// another UID.
func (b *GateBuilder[T]) ToBeDeleted() *GateBuilder[T] {
	b.g.setOutcome(b.m, "ToBeDeleted", gate.Deleted())
	return b
}

// ToMatch waits until pred holds for the object.
func (b *GateBuilder[T]) ToMatch(pred func(T) bool) *GateBuilder[T] {
	b.g.setOutcome(b.m, "ToMatch", predicate(b.proto, pred, callSite(1)))
	return b
}

// ToBe waits until every condition holds for the object.
func (b *GateBuilder[T]) ToBe(conds ...gate.Cond) *GateBuilder[T] {
	if len(conds) == 0 {
		b.m.recordf(1, "gate %s: ToBe(): expected at least one condition, got none", b.g.id())
	}
	b.g.setOutcome(b.m, "ToBe", gate.And(conds...))
	return b
}

// Then runs cb with the object once the gate's outcome holds. A returned
// error is retried with backoff; wrap it in gate.Permanent to fail the phase.
func (b *GateBuilder[T]) Then(cb func(ctx context.Context, obj T, s Store) error) *GateBuilder[T] {
	b.then = cb
	return b
}

// All turns the gate into one over every selected object.
func (b *GateBuilder[T]) All() *SetGateBuilder[T] { return b.set(waitfor.All, 0) }

// Any turns the gate into one over the selected objects that is done when one
// of them holds (the default of a selector).
func (b *GateBuilder[T]) Any() *SetGateBuilder[T] { return b.set(waitfor.Any, 0) }

// AtLeast turns the gate into one that is done when n selected objects hold.
func (b *GateBuilder[T]) AtLeast(n int) *SetGateBuilder[T] {
	if n < 1 {
		b.m.recordf(1, "gate %s: AtLeast(%d): expected 1 or more", b.g.id(), n)
	}
	return b.set(waitfor.AtLeast, n)
}

func (b *GateBuilder[T]) set(mode waitfor.Mode, n int) *SetGateBuilder[T] {
	if b.g.spec.Name != "" {
		b.m.recordf(2, "gate %s: All/Any/AtLeast over the single object named %q: select objects with WithLabel or WithField instead", b.g.id(), b.g.spec.Name)
	}
	b.g.spec.Mode, b.g.spec.N = mode, n
	s := &SetGateBuilder[T]{m: b.m, g: b.g, proto: b.proto}
	b.g.finish = func(ctx context.Context, objs []*unstructured.Unstructured, st Store) (any, error) {
		list := make([]T, 0, len(objs))
		for _, o := range objs {
			t, err := convert(b.proto, o)
			if err != nil {
				return nil, gate.Permanent(err)
			}
			list = append(list, t)
		}
		if s.then != nil {
			if err := s.then(ctx, list, st); err != nil {
				return nil, err
			}
		}
		return list, nil
	}
	return s
}

// SetGateBuilder declares a gate over the set of objects a selector picks;
// its callbacks receive the objects that hold.
type SetGateBuilder[T client.Object] struct {
	m     *Module
	g     *gateDef
	proto T
	then  func(ctx context.Context, objs []T, s Store) error
}

// InPhase: see GateBuilder.InPhase.
func (b *SetGateBuilder[T]) InPhase(n int) *SetGateBuilder[T] { setPhase(b.m, b.g, n); return b }

// Named: see GateBuilder.Named.
func (b *SetGateBuilder[T]) Named(name string) *SetGateBuilder[T] { setName(b.m, b.g, name); return b }

// Timeout: see GateBuilder.Timeout.
func (b *SetGateBuilder[T]) Timeout(d time.Duration) *SetGateBuilder[T] {
	setTimeout(b.m, b.g, d)
	return b
}

// Optional: see GateBuilder.Optional.
func (b *SetGateBuilder[T]) Optional() *SetGateBuilder[T] { b.g.optional = true; return b }

// Creates declares that the gate's callback creates the object: see
// GateBuilder.Creates.
func (b *SetGateBuilder[T]) Creates(proto client.Object, namespace, name string) *SetGateBuilder[T] {
	addCreates(b.m, b.g, proto, namespace, name)
	return b
}

// OnTimeout finishes the gate with fn's objects when the timeout expires.
func (b *SetGateBuilder[T]) OnTimeout(fn func(ctx context.Context) ([]T, error)) *SetGateBuilder[T] {
	b.g.fallback = func(ctx context.Context, s Store) (any, error) {
		objs, err := fn(ctx)
		if err != nil {
			return nil, err
		}
		if b.then != nil {
			if err := b.then(ctx, objs, s); err != nil {
				return nil, err
			}
		}
		return objs, nil
	}
	return b
}

// ToBeCreated waits until the selected objects exist, then runs cb.
func (b *SetGateBuilder[T]) ToBeCreated(cb func(ctx context.Context, objs []T, s Store) error) *SetGateBuilder[T] {
	b.g.setOutcome(b.m, "ToBeCreated", gate.Created())
	b.then = cb
	return b
}

// ToBeDeleted waits until no selected object is left.
func (b *SetGateBuilder[T]) ToBeDeleted() *SetGateBuilder[T] {
	b.g.setOutcome(b.m, "ToBeDeleted", gate.Deleted())
	return b
}

// ToMatch waits until pred holds for the selected objects.
func (b *SetGateBuilder[T]) ToMatch(pred func(T) bool) *SetGateBuilder[T] {
	b.g.setOutcome(b.m, "ToMatch", predicate(b.proto, pred, callSite(1)))
	return b
}

// ToBe waits until every condition holds for the selected objects.
func (b *SetGateBuilder[T]) ToBe(conds ...gate.Cond) *SetGateBuilder[T] {
	if len(conds) == 0 {
		b.m.recordf(1, "gate %s: ToBe(): expected at least one condition, got none", b.g.id())
	}
	b.g.setOutcome(b.m, "ToBe", gate.And(conds...))
	return b
}

// Then runs cb with the objects that hold once the gate is done.
func (b *SetGateBuilder[T]) Then(cb func(ctx context.Context, objs []T, s Store) error) *SetGateBuilder[T] {
	b.then = cb
	return b
}

// createdObject is an object a gate's callback creates.
type createdObject struct {
	gvk             schema.GroupVersionKind
	namespace, name string
}

func addCreates(m *Module, g *gateDef, proto client.Object, namespace, name string) {
	gvk, err := scheme.GVKOf(m.scheme, proto)
	if err != nil {
		m.recordf(2, "Creates: %v", err)
		return
	}
	g.creates = append(g.creates, createdObject{gvk: gvk, namespace: namespace, name: name})
}

func setPhase(m *Module, g *gateDef, n int) {
	if n < 0 {
		m.recordf(2, "gate %s: InPhase(%d): expected a phase of 0 or more", g.id(), n)
		return
	}
	g.phase = n
}

func setName(m *Module, g *gateDef, name string) {
	if problems := validation.IsDNS1123Subdomain(name); len(problems) > 0 {
		m.recordf(2, "gate name %q: expected lower-case letters, digits, '-' and '.': %s", name, strings.Join(problems, "; "))
		return
	}
	g.name = name
}

func setTimeout(m *Module, g *gateDef, d time.Duration) {
	if d <= 0 {
		m.recordf(2, "gate %s: Timeout(%s): expected a positive duration; leave it out to wait without limit", g.id(), d)
		return
	}
	g.timeout = d
}

func addLabel(m *Module, g *gateDef, key string, value []string) {
	var req *labels.Requirement
	var err error
	switch len(value) {
	case 0:
		req, err = labels.NewRequirement(key, selection.Exists, nil)
	case 1:
		req, err = labels.NewRequirement(key, selection.Equals, value)
	default:
		err = fmt.Errorf("expected one value at most, got %d", len(value))
	}
	if err != nil {
		m.recordf(2, "gate %s: WithLabel(%q): %v", g.id(), key, err)
		return
	}
	g.labelReqs = append(g.labelReqs, *req)
}

// convert turns an unstructured object into a fresh T, by way of JSON: the
// result the API machinery's reflective converter is specified to give (its
// mismatch detector compares against this very round trip), without its
// field cache, which copies a whole map for each struct field it meets for
// the first time: for a CRD's nested schema types, about a megabyte of
// garbage in a short-lived gate process.
func convert[T client.Object](proto T, u *unstructured.Unstructured) (T, error) {
	var zero T
	if _, ok := any(proto).(*unstructured.Unstructured); ok {
		return any(u.DeepCopy()).(T), nil
	}
	obj := reflect.New(reflect.TypeOf(proto).Elem()).Interface().(T)
	data, err := utiljson.Marshal(u.Object)
	if err == nil {
		err = utiljson.Unmarshal(data, obj)
	}
	if err != nil {
		return zero, fmt.Errorf("convert %s %s to %T: %w", u.GetKind(), u.GetName(), obj, err)
	}
	return obj, nil
}

// predicate wraps a typed predicate as a condition.
func predicate[T client.Object](proto T, pred func(T) bool, site string) gate.Cond {
	return predCond[T]{proto: proto, pred: pred, site: site}
}

type predCond[T client.Object] struct {
	proto T
	pred  func(T) bool
	site  string
}

func (p predCond[T]) Check(u *unstructured.Unstructured) (bool, string) {
	if u == nil {
		return false, "not found"
	}
	obj, err := convert(p.proto, u)
	if err != nil {
		return false, err.Error()
	}
	if p.pred(obj) {
		return true, ""
	}
	return false, "found, predicate not satisfied"
}

func (p predCond[T]) String() string { return "match the predicate at " + p.site }
