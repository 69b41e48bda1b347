package vigil

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/internal/definition/define"
	"github.com/vigilkit/vigil/internal/definition/spec"
)

// Kind names an object kind known only at run time, for WaitFor, When, Watch
// and NewLister; it is handled as unstructured.
func Kind(group, version, kind string) *unstructured.Unstructured {
	return define.Kind(group, version, kind)
}

// Metadata names a kind whose objects a binding or a Lister reads by their
// metadata alone — name, namespace, labels, annotations, owners,
// finalizers — for Watch, When and NewLister. Its informers list and watch
// the kind as metadata (PartialObjectMetadata), so the module's memory
// holds a fraction of each object: what a watch of every Pod of a large
// cluster needs when its handler reads labels or annotations. The handler
// gets a *metav1.PartialObjectMetadata.
//
//	vigil.Watch(c, vigil.Metadata("", "v1", "Pod")).Reconcile(
//		func(ctx context.Context, p *metav1.PartialObjectMetadata) error { ... })
func Metadata(group, version, kind string) *metav1.PartialObjectMetadata {
	return define.Metadata(group, version, kind)
}

// MetadataWithPlural is Metadata for a kind whose resource is not the one
// Kubernetes guesses, as KindWithPlural is Kind.
func MetadataWithPlural(group, version, kind, plural string) *metav1.PartialObjectMetadata {
	return define.MetadataWithPlural(define.Caller(), group, version, kind, plural)
}

// KindWithPlural is Kind for a kind whose resource — the plural its CRD
// names, as in `kubectl get clusterconfig` — is not the one Kubernetes
// guesses from the kind (clusterconfigs): the RBAC rules, webhook rules and
// admission policies vigil derives for the module that declares a binding,
// gate or lister of it then name that resource. A plural that is not a
// lowercase resource name panics at definition, naming the call.
//
//	clusterConfig := vigil.KindWithPlural("uds.dev", "v1alpha1", "ClusterConfig", "clusterconfig")
func KindWithPlural(group, version, kind, plural string) *unstructured.Unstructured {
	return define.KindWithPlural(define.Caller(), group, version, kind, plural)
}

// GateBuilder declares a gate on one object of type T: one named object, or
// any one of those a selector picks. Every option returns the builder it is
// called on.
type GateBuilder[T client.Object] struct {
	m     *Module
	g     *define.Gate
	proto T
	then  func(ctx context.Context, obj T, s Store) error
}

// WaitFor declares a startup gate on objects of proto's type: the module
// does not serve until it holds. proto may be a typed object registered in the
// module's scheme, or one made by Kind.
func WaitFor[T client.Object](m *Module, proto T) *GateBuilder[T] {
	b := &GateBuilder[T]{m: m, proto: proto}
	b.g = define.NewWaitGate(m.d, proto, define.Caller(), &b.then)
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
	s := &SetGateBuilder[T]{m: b.m, g: b.g, proto: b.proto}
	b.g.Finish = define.FinishAll(b.proto, &s.then)
	return s
}

// SetGateBuilder declares a gate over the set of objects a selector picks;
// its callbacks receive the objects that hold. Every option returns the
// builder it is called on.
type SetGateBuilder[T client.Object] struct {
	m     *Module
	g     *define.Gate
	proto T
	then  func(ctx context.Context, objs []T, s Store) error
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
