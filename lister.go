package vigil

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/internal/definition/define"
	"github.com/vigilkit/vigil/internal/definition/scheme"
	"github.com/vigilkit/vigil/internal/definition/spec"
)

// Lister is a typed, informer-backed read cache of one kind of object, for
// handlers of every role: see NewLister.
type Lister[T client.Object] struct {
	m   *Module
	src *define.ListerSource
}

// NewLister declares a read cache of every object of proto's type, such as
// NewLister(m, &corev1.Pod{}) or NewLister(m, vigil.Kind("uds.dev",
// "v1alpha1", "Exemption")), fed by the informer the module's watches of the
// kind share; the admission and watcher roles sync it before they are ready.
// An admission decision a lister may have changed (a denial, or an allow after
// a read found an object) is made again once the listers it read caught up.
func NewLister[T client.Object](m *Module, proto T) *Lister[T] {
	return listerFor(m, proto, define.Caller())
}

func listerFor[T client.Object](m *Module, proto T, site string) *Lister[T] {
	c := &Lister[T]{m: m, src: &define.ListerSource{}}
	gvk, err := scheme.GVKOf(m.d.Scheme, proto)
	if err != nil {
		m.d.Recordf(site, "Lister: %v", err)
		return c
	}
	c.src.GVK, c.src.New = gvk, spec.NewObjectFunc(proto, gvk)
	if c.src.NewList, err = define.ListOf(m.d.Scheme, proto, gvk); err != nil {
		m.d.Recordf(site, "Lister: %v", err)
		return c
	}
	m.d.AddLister(define.Lister{Spec: spec.Lister{GVK: gvk, New: c.src.New}, Source: c.src, Site: site})
	return c
}

// InNamespace limits the lister to these namespaces: its informer lists and
// watches only them, its RBAC is a Role in each, its freshness re-check reads
// them, and a read of another finds nothing. Scope it to what its decisions
// need, so its memory is bounded by what trusted users write:
//
//	exemptions := vigil.NewLister(m, vigil.Kind("uds.dev", "v1alpha1", "Exemption")).
//		InNamespace("uds-policy-exemptions")
func (c *Lister[T]) InNamespace(namespaces ...string) *Lister[T] {
	if len(namespaces) == 0 || slices.Contains(namespaces, "") {
		c.m.d.Recordf(define.Caller(), "Lister of %s: InNamespace(%q): expected one or more namespace names, none empty", c.src.GVK.Kind, namespaces)
		return c
	}
	ns := slices.Clone(namespaces)
	slices.Sort(ns)
	c.m.d.ScopeLister(c.src, slices.Compact(ns))
	return c
}

// Get returns the object of that namespace (empty for cluster-scoped kinds)
// and name, from the cache's index; a missing object, or one outside the
// namespaces of InNamespace, is an error for which
// k8s.io/apimachinery/pkg/api/errors.IsNotFound holds.
func (c *Lister[T]) Get(ctx context.Context, namespace, name string) (T, error) {
	var zero T
	obj, err := c.src.Get(ctx, namespace, name)
	if err != nil {
		return zero, err
	}
	return obj.(T), nil
}

// List returns the cached objects that match the options, such as
// client.InNamespace("apps") and client.MatchingLabels{"team": "shop"}.
func (c *Lister[T]) List(ctx context.Context, opts ...client.ListOption) ([]T, error) {
	return c.Find(ctx, nil, opts...)
}

// Find returns the cached objects that match the options and for which
// match holds (every one when match is nil), such as the Exemptions that
// name a Pod. Only those count as found: an admission decision that read
// objects is made again on fresh data when it denies, or when a read found
// an object (see NewLister), and with Find an allow that found none of the
// objects it looks for is not — as with Get of an object that does not
// exist — however many others the cache holds.
func (c *Lister[T]) Find(ctx context.Context, match func(T) bool, opts ...client.ListOption) ([]T, error) {
	var m func(runtime.Object) bool
	if match != nil {
		m = func(o runtime.Object) bool {
			t, ok := o.(T)
			return ok && match(t)
		}
	}
	items, err := c.src.Find(ctx, m, opts...)
	if err != nil {
		return nil, err
	}
	var out []T
	for _, o := range items {
		t, ok := o.(T)
		if !ok {
			return nil, fmt.Errorf("lister of %s: the cache holds %T, not %T", c.src.GVK.Kind, o, t)
		}
		out = append(out, t)
	}
	return out, nil
}
