package define

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/runtime/callctx"
	"github.com/vigilkit/vigil/internal/serving/fresh"
)

// ListerSource is what a lister reads: the cache of the role whose handler
// reads it, from the handler's context (callctx.Role.Cache), and its type's
// freshness barrier in the admission role. Every read is recorded in the
// reads of the admission binding running, if any.
type ListerSource struct {
	GVK     schema.GroupVersionKind
	New     func() client.Object
	NewList func() client.ObjectList
	// Metadata: the lister reads each object's metadata alone
	// (vigil.Metadata), from an informer, and a barrier, of its own.
	Metadata bool
	// Namespaces, when set, are the only namespaces the lister reads: an
	// object of another namespace is not found, even where the role's
	// informer of the type holds it for another user.
	Namespaces []string
}

// Get reads one object by key from the cache's index.
func (s *ListerSource) Get(ctx context.Context, namespace, name string) (client.Object, error) {
	r, barrier, err := s.reader(ctx)
	if err != nil {
		return nil, err
	}
	obj := s.New()
	if !s.inScope(namespace) {
		err = apierrors.NewNotFound(schema.GroupResource{Group: s.GVK.Group, Resource: s.GVK.Kind}, name)
	} else {
		err = r.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, obj)
	}
	callctx.Reads(ctx).Note(barrier, fresh.KeyScope(namespace, name), err == nil)
	if err != nil {
		return nil, err
	}
	return obj, nil
}

// List reads the cached objects that match the options.
func (s *ListerSource) List(ctx context.Context, opts ...client.ListOption) ([]runtime.Object, error) {
	return s.Find(ctx, nil, opts...)
}

// Find reads the cached objects that match the options and for which match
// holds (every one when match is nil); only those count as found, as Get's
// one object does.
func (s *ListerSource) Find(ctx context.Context, match func(runtime.Object) bool, opts ...client.ListOption) ([]runtime.Object, error) {
	r, barrier, err := s.reader(ctx)
	if err != nil {
		return nil, err
	}
	list := s.NewList()
	scope := fresh.ListScope(opts)
	err = r.List(ctx, list, opts...)
	if err != nil {
		callctx.Reads(ctx).Note(barrier, scope, false)
		return nil, err
	}
	items, err := meta.ExtractListWithAlloc(list)
	if len(s.Namespaces) > 0 {
		items = slices.DeleteFunc(items, func(o runtime.Object) bool {
			m, ok := o.(metav1.Object)
			return !ok || !s.inScope(m.GetNamespace())
		})
	}
	if match != nil {
		items = slices.DeleteFunc(items, func(o runtime.Object) bool { return !match(o) })
	}
	callctx.Reads(ctx).Note(barrier, scope, len(items) > 0)
	return items, err
}

// inScope reports whether the lister reads objects of namespace ns.
func (s *ListerSource) inScope(ns string) bool {
	return len(s.Namespaces) == 0 || slices.Contains(s.Namespaces, ns)
}

// reader is the cache the role in ctx started, and the barrier of the
// lister's type in it (nil without one).
func (s *ListerSource) reader(ctx context.Context) (client.Reader, *fresh.Barrier, error) {
	if s.New == nil || s.NewList == nil {
		return nil, nil, fmt.Errorf("this lister was declared with a mistake: see the module's definition errors")
	}
	r, barriers := callctx.RoleOf(ctx).Cache()
	if r == nil {
		return nil, nil, fmt.Errorf("lister of %s is not started: listers serve the admission and watcher roles, once started", s.GVK.Kind)
	}
	return r, barriers.For(s.GVK, s.Metadata), nil
}

// NewListerSource declares a lister of proto's kind on m, at site, and
// returns the source its reads go to. A kind the scheme cannot place is a
// mistake recorded at site, which Verify reports before anything starts.
func NewListerSource(m *Module, proto client.Object, site string) *ListerSource {
	src := &ListerSource{}
	gvk, err := m.GVKOf(site, proto)
	if err != nil {
		m.Recordf(site, "Lister: %v", err)
		return src
	}
	src.GVK, src.New = gvk, spec.NewObjectFunc(proto, gvk)
	_, src.Metadata = proto.(*metav1.PartialObjectMetadata)
	if src.NewList, err = ListOf(m.Scheme, proto, gvk); err != nil {
		m.Recordf(site, "Lister: %v", err)
		return src
	}
	m.AddLister(Lister{Spec: spec.Lister{GVK: gvk, New: src.New}, Source: src, Site: site})
	return src
}

// GetTyped is Get for a lister of T.
func GetTyped[T client.Object](ctx context.Context, s *ListerSource, namespace, name string) (T, error) {
	obj, err := s.Get(ctx, namespace, name)
	if err != nil {
		var zero T
		return zero, err
	}
	return obj.(T), nil
}

// FindTyped is Find for a lister of T: match sees each object as T, and
// the found objects come back as T.
func FindTyped[T client.Object](ctx context.Context, s *ListerSource, match func(T) bool, opts ...client.ListOption) ([]T, error) {
	var m func(runtime.Object) bool
	if match != nil {
		m = func(o runtime.Object) bool {
			t, ok := o.(T)
			return ok && match(t)
		}
	}
	items, err := s.Find(ctx, m, opts...)
	if err != nil {
		return nil, err
	}
	var out []T
	for _, o := range items {
		t, ok := o.(T)
		if !ok {
			return nil, fmt.Errorf("lister of %s: the cache holds %T, not %T", s.GVK.Kind, o, t)
		}
		out = append(out, t)
	}
	return out, nil
}
