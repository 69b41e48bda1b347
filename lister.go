package vigil

import (
	"context"
	"fmt"
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/internal/define"
	"github.com/vigilkit/vigil/internal/scheme"
	"github.com/vigilkit/vigil/internal/spec"
)

// Lister is a typed, informer-backed read cache of one kind of object, for
// handlers of every role: see NewLister.
type Lister[T client.Object] struct {
	m   *Module
	src *define.ListerSource
}

// NewLister declares a read cache of every object of proto's type, such as
// NewLister(m, &corev1.Pod{}), or of a kind named at run time:
// NewLister(m, vigil.Kind("uds.dev", "v1alpha1", "Exemption")) caches
// unstructured objects. It reads cluster-wide
// unless scoped with InNamespace, fed by the same shared informer as the
// module's watches of T. The admission and watcher roles sync it before they report ready, so a handler can read live
// objects — an admission handler can consult the current Exemptions — without
// a call to the API server. Declare listers with the module, before Run.
//
// An admission decision that a lister's data may have changed — a denial, or
// an allow after a read found an object, as an Exemption grants — is made
// again, once, after the listers the binding read have caught up with the API
// server: a cache that lags the request does not decide it.
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

// InNamespace limits the lister to the objects of these namespaces: its
// informer lists and watches only them (a cluster-wide watch of the same kind
// elsewhere in the module widens the informer, never what the lister reads),
// its RBAC is a Role in each namespace instead of a ClusterRole, and the
// freshness re-check of an admission decision reads the same namespaces. A
// read of another namespace finds nothing. Scope a lister to what the
// decisions that read it need — the namespace only trusted users can write,
// say — so its memory is bounded by what they write, not by what anyone may
// create in her own namespace. Call it where the lister is declared, before
// Run:
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
	items, err := c.src.List(ctx, opts...)
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
