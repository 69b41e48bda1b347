package define

import (
	"context"
	"fmt"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/internal/callctx"
	"github.com/vigilkit/vigil/internal/fresh"
)

// ListerSource is what a lister reads: the role's cache once started, and
// its type's freshness barrier in the admission role. Every read is recorded
// in the reads of the admission binding running, if any.
type ListerSource struct {
	GVK     schema.GroupVersionKind
	New     func() client.Object
	NewList func() client.ObjectList
	Reader  atomic.Pointer[client.Reader]
	Barrier atomic.Pointer[fresh.Barrier]
}

// Use plugs a started cache and its barriers in.
func (s *ListerSource) Use(r client.Reader, barriers fresh.Set) {
	s.Reader.Store(&r)
	if b := barriers.For(s.GVK); b != nil {
		s.Barrier.Store(b)
	}
}

// Get reads one object by key from the cache's index.
func (s *ListerSource) Get(ctx context.Context, namespace, name string) (client.Object, error) {
	r, err := s.reader()
	if err != nil {
		return nil, err
	}
	obj := s.New()
	err = r.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, obj)
	callctx.Reads(ctx).Note(s.Barrier.Load(), err == nil)
	if err != nil {
		return nil, err
	}
	return obj, nil
}

// List reads the cached objects that match the options.
func (s *ListerSource) List(ctx context.Context, opts ...client.ListOption) ([]runtime.Object, error) {
	r, err := s.reader()
	if err != nil {
		return nil, err
	}
	list := s.NewList()
	err = r.List(ctx, list, opts...)
	if err != nil {
		callctx.Reads(ctx).Note(s.Barrier.Load(), false)
		return nil, err
	}
	items, err := meta.ExtractListWithAlloc(list)
	callctx.Reads(ctx).Note(s.Barrier.Load(), len(items) > 0)
	return items, err
}

func (s *ListerSource) reader() (client.Reader, error) {
	if s.New == nil || s.NewList == nil {
		return nil, fmt.Errorf("this lister was declared with a mistake: see the module's definition errors")
	}
	r := s.Reader.Load()
	if r == nil {
		return nil, fmt.Errorf("lister of %s is not started: listers serve the admission and watcher roles, once started", s.GVK.Kind)
	}
	return *r, nil
}
