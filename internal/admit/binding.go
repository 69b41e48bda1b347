package admit

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/store"
)

// Action is what a binding does.
type Action int

const (
	// Mutate bindings edit the object; they are served on the mutate path.
	Mutate Action = iota
	// Validate bindings judge the object; they are served on the validate path.
	Validate
)

func (a Action) String() string {
	if a == Mutate {
		return "mutate"
	}
	return "validate"
}

// Meta is what filters see of a request: the object's metadata (the old
// object's on DELETE) and the request's namespace.
type Meta struct {
	Namespace string
	Object    *metav1.PartialObjectMetadata
}

// Filter decides in-process whether a binding runs for a request.
type Filter struct {
	// Describe says what it selects, e.g. `label app=web`.
	Describe string
	Match    func(Meta) bool
}

// Binding is one mutation or validation of one kind of object, whatever its
// Go type.
type Binding struct {
	Capability string
	Name       string
	GVK        schema.GroupVersionKind
	Operations []admissionv1.Operation
	// Namespaces the capability is limited to; empty for all.
	Namespaces []string
	Filters    []Filter
	Action     Action
	// FailClosed bindings are served by static webhooks with failurePolicy
	// Fail from install on, instead of being registered when ready.
	FailClosed bool

	newObject func() client.Object
	typ       reflect.Type
	mutate    func(ctx context.Context, obj, old client.Object, in *input) error
	validate  func(ctx context.Context, obj, old client.Object, in *input) (admission.Verdict, error)
}

// input is what a typed request is made from, besides its objects.
type input struct {
	raw   *admissionv1.AdmissionRequest
	store store.Store
}

// ErrDryRun refuses a Store write made while admitting a dry-run request:
// the webhooks declare no side effects.
var ErrDryRun = errors.New("store writes are refused while admitting a dry-run request: the webhook declares sideEffects None; check req.DryRun before writing")

// MutateBinding makes a binding that runs fn on objects of proto's type.
func MutateBinding[T client.Object](gvk schema.GroupVersionKind, proto T, fn func(ctx context.Context, req *admission.Request[T]) error) Binding {
	b := Binding{GVK: gvk, Action: Mutate, newObject: newOf(proto), typ: reflect.TypeOf(proto)}
	b.mutate = func(ctx context.Context, obj, old client.Object, in *input) error {
		return fn(ctx, typed[T](obj, old, in))
	}
	return b
}

// ValidateBinding makes a binding that judges objects of proto's type with fn.
func ValidateBinding[T client.Object](gvk schema.GroupVersionKind, proto T, fn func(ctx context.Context, req *admission.Request[T]) admission.Verdict) Binding {
	b := Binding{GVK: gvk, Action: Validate, newObject: newOf(proto), typ: reflect.TypeOf(proto)}
	b.validate = func(ctx context.Context, obj, old client.Object, in *input) (admission.Verdict, error) {
		return fn(ctx, typed[T](obj, old, in)), nil
	}
	return b
}

func typed[T client.Object](obj, old client.Object, in *input) *admission.Request[T] {
	r := in.raw
	req := &admission.Request[T]{
		Operation: r.Operation,
		UserInfo:  r.UserInfo,
		DryRun:    r.DryRun != nil && *r.DryRun,
		Namespace: r.Namespace,
		Name:      r.Name,
		Kind:      r.Kind,
		Store:     in.store,
		Raw:       r,
	}
	if obj != nil {
		req.Object = obj.(T)
	}
	if old != nil {
		req.OldObject = old.(T)
	}
	return req
}

// newOf returns a constructor of fresh objects of proto's type.
func newOf[T client.Object](proto T) func() client.Object {
	if u, ok := any(proto).(*unstructured.Unstructured); ok {
		gvk := u.GroupVersionKind()
		return func() client.Object {
			n := &unstructured.Unstructured{}
			n.SetGroupVersionKind(gvk)
			return n
		}
	}
	t := reflect.TypeOf(proto).Elem()
	return func() client.Object { return reflect.New(t).Interface().(client.Object) }
}

// matches reports whether the binding runs for this request.
func (b *Binding) matches(req *admissionv1.AdmissionRequest, meta func() Meta) bool {
	if req.Kind.Group != b.GVK.Group || req.Kind.Kind != b.GVK.Kind || req.Kind.Version != b.GVK.Version {
		return false
	}
	if len(b.Operations) > 0 && !slices.Contains(b.Operations, req.Operation) {
		return false
	}
	if len(b.Namespaces) > 0 && !slices.Contains(b.Namespaces, req.Namespace) {
		return false
	}
	if len(b.Filters) == 0 {
		return true
	}
	m := meta()
	for _, f := range b.Filters {
		if !f.Match(m) {
			return false
		}
	}
	return true
}

// ID names the binding in messages and metrics: capability/binding.
func (b *Binding) ID() string { return b.Capability + "/" + b.Name }

// Filters, as the module API offers them.

// InNamespace selects objects in one of the namespaces.
func InNamespace(namespaces ...string) Filter {
	return Filter{Describe: fmt.Sprintf("in namespaces %v", namespaces), Match: func(m Meta) bool {
		return slices.Contains(namespaces, m.Namespace)
	}}
}

// InNamespaceRegex selects objects in namespaces matching re.
func InNamespaceRegex(re *regexp.Regexp) Filter {
	return Filter{Describe: "in namespaces matching " + re.String(), Match: func(m Meta) bool {
		return re.MatchString(m.Namespace)
	}}
}

// WithName selects the object of this name.
func WithName(name string) Filter {
	return Filter{Describe: "named " + name, Match: func(m Meta) bool { return m.Object.Name == name }}
}

// WithNameRegex selects objects whose name matches re.
func WithNameRegex(re *regexp.Regexp) Filter {
	return Filter{Describe: "named like " + re.String(), Match: func(m Meta) bool { return re.MatchString(m.Object.Name) }}
}

// WithLabel selects objects with the label, and the value when given.
func WithLabel(key string, value ...string) Filter {
	return mapFilter("label", key, value, func(m Meta) map[string]string { return m.Object.Labels })
}

// WithAnnotation selects objects with the annotation, and the value when given.
func WithAnnotation(key string, value ...string) Filter {
	return mapFilter("annotation", key, value, func(m Meta) map[string]string { return m.Object.Annotations })
}

func mapFilter(what, key string, value []string, get func(Meta) map[string]string) Filter {
	if len(value) == 0 {
		return Filter{Describe: what + " " + key, Match: func(m Meta) bool {
			_, ok := get(m)[key]
			return ok
		}}
	}
	want := value[0]
	return Filter{Describe: what + " " + key + "=" + want, Match: func(m Meta) bool {
		v, ok := get(m)[key]
		return ok && v == want
	}}
}

// WithDeletionTimestamp selects objects that are being deleted.
func WithDeletionTimestamp() Filter {
	return Filter{Describe: "being deleted", Match: func(m Meta) bool { return m.Object.DeletionTimestamp != nil }}
}

// dryRunStore refuses writes: see ErrDryRun.
type dryRunStore struct{ store.Store }

func (dryRunStore) Set(context.Context, string, string) error { return ErrDryRun }
func (dryRunStore) Update(context.Context, string, func(string, bool) (string, error)) error {
	return ErrDryRun
}
func (dryRunStore) Remove(context.Context, string) error              { return ErrDryRun }
func (dryRunStore) SetAndWait(context.Context, string, string) error  { return ErrDryRun }
func (dryRunStore) RemoveAndWait(context.Context, string) error       { return ErrDryRun }
func (d dryRunStore) Subscribe(fn func(store.Change)) (func(), error) { return d.Store.Subscribe(fn) }
func (d dryRunStore) WaitForSync(ctx context.Context) error           { return d.Store.WaitForSync(ctx) }
func (d dryRunStore) Get(key string) (string, bool, error)            { return d.Store.Get(key) }
func (d dryRunStore) Keys() ([]string, error)                         { return d.Store.Keys() }
