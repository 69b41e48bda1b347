package vigil

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/internal/definition/define"
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
	return &Lister[T]{m: m, src: define.NewListerSource(m.d, proto, define.Caller())}
}

// InNamespace limits the lister to these namespaces: its informer lists and
// watches only them, its RBAC is a Role in each, its freshness re-check reads
// them, and a read of another finds nothing. Scope it to what its decisions
// need, so its memory is bounded by what trusted users write:
//
//	exemptions := vigil.NewLister(m, vigil.Kind("uds.dev", "v1alpha1", "Exemption")).
//		InNamespace("uds-policy-exemptions")
func (c *Lister[T]) InNamespace(namespaces ...string) *Lister[T] {
	c.m.d.ScopeLister(define.Caller(), c.src, namespaces)
	return c
}

// Get returns the object of that namespace (empty for cluster-scoped kinds)
// and name, from the cache's index; a missing object, or one outside the
// namespaces of InNamespace, is an error for which
// k8s.io/apimachinery/pkg/api/errors.IsNotFound holds.
func (c *Lister[T]) Get(ctx context.Context, namespace, name string) (T, error) {
	return define.GetTyped[T](ctx, c.src, namespace, name)
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
	return define.FindTyped(ctx, c.src, match, opts...)
}
