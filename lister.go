package vigil

import (
	"context"
	"fmt"
	"reflect"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/internal/define"
	"github.com/vigilkit/vigil/internal/scheme"
	"github.com/vigilkit/vigil/internal/spec"
)

// Lister is a typed, informer-backed read cache of one kind of object, for
// handlers of every role: see NewLister.
type Lister[T client.Object] struct {
	m      *Module
	gvk    schema.GroupVersionKind
	newObj func() client.Object
	newLst func() client.ObjectList
	reader *atomic.Pointer[client.Reader]
}

// NewLister declares a read cache of every object of type T, cluster-wide, fed
// by the same shared informer as the module's watches of T. The admission and
// watcher roles sync it before they report ready, so a handler can read live
// objects — an admission handler can consult the current Exemptions — without
// a call to the API server. Declare listers with the module, before Run.
func NewLister[T client.Object](m *Module) *Lister[T] {
	var zero T
	t := reflect.TypeOf(zero)
	if t == nil || t.Kind() != reflect.Pointer {
		m.recordf(1, "NewLister[%T]: expected a pointer to a Go type of a Kubernetes object, such as *corev1.ConfigMap", zero)
		return &Lister[T]{m: m, reader: &atomic.Pointer[client.Reader]{}}
	}
	proto := reflect.New(t.Elem()).Interface().(T)
	if _, ok := any(proto).(*unstructured.Unstructured); ok {
		m.recordf(1, "NewLister[*unstructured.Unstructured]: the kind is unknown: use NewListerFor(m, vigil.Kind(group, version, kind))")
		return &Lister[T]{m: m, reader: &atomic.Pointer[client.Reader]{}}
	}
	return listerFor(m, proto, 2)
}

// NewListerFor is NewLister for a kind named at run time: NewListerFor(m,
// vigil.Kind("uds.dev", "v1alpha1", "Exemption")) caches unstructured objects.
func NewListerFor[T client.Object](m *Module, proto T) *Lister[T] {
	return listerFor(m, proto, 2)
}

func listerFor[T client.Object](m *Module, proto T, skip int) *Lister[T] {
	c := &Lister[T]{m: m, reader: &atomic.Pointer[client.Reader]{}}
	gvk, err := scheme.GVKOf(m.d.Scheme, proto)
	if err != nil {
		m.recordf(skip, "Lister: %v", err)
		return c
	}
	c.gvk = gvk
	c.newObj = define.NewObjectFunc(proto, gvk)
	if c.newLst, err = define.ListOf(m.d.Scheme, proto, gvk); err != nil {
		m.recordf(skip, "Lister: %v", err)
		return c
	}
	m.d.AddLister(define.Lister{Spec: spec.Lister{GVK: gvk, New: c.newObj}, Reader: c.reader, Site: callSite(skip)})
	return c
}

// Get returns the object of that namespace (empty for cluster-scoped kinds)
// and name; a missing object is an error for which
// k8s.io/apimachinery/pkg/api/errors.IsNotFound holds.
func (c *Lister[T]) Get(ctx context.Context, namespace, name string) (T, error) {
	var zero T
	r, err := c.source()
	if err != nil {
		return zero, err
	}
	obj := c.newObj()
	if err := r.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, obj); err != nil {
		return zero, err
	}
	return obj.(T), nil
}

// List returns the cached objects that match the options, such as
// client.InNamespace("apps") and client.MatchingLabels{"team": "shop"}.
func (c *Lister[T]) List(ctx context.Context, opts ...client.ListOption) ([]T, error) {
	r, err := c.source()
	if err != nil {
		return nil, err
	}
	list := c.newLst()
	if err := r.List(ctx, list, opts...); err != nil {
		return nil, err
	}
	var out []T
	err = meta.EachListItem(list, func(o runtime.Object) error {
		t, ok := o.(T)
		if !ok {
			return fmt.Errorf("lister of %s: the cache holds %T, not %T", c.gvk.Kind, o, t)
		}
		out = append(out, t)
		return nil
	})
	return out, err
}

func (c *Lister[T]) source() (client.Reader, error) {
	if c.newObj == nil {
		return nil, fmt.Errorf("lister of %T was declared with a mistake: see the module's definition errors", *new(T))
	}
	r := c.reader.Load()
	if r == nil {
		return nil, fmt.Errorf("lister of %s is not started: listers serve the admission and watcher roles, once started", c.gvk.Kind)
	}
	return *r, nil
}
