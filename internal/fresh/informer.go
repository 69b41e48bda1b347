package fresh

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Set holds a role's barriers, one per lister type.
type Set map[schema.GroupVersionKind]*Barrier

// For is the barrier of a type; nil when there is none.
func (s Set) For(gvk schema.GroupVersionKind) *Barrier { return s[gvk] }

// Selection is what the cache of a type holds, as its informer selects on
// the server: the consistent read must select the same.
type Selection struct {
	// Namespaces limit the cache to these namespaces; all when empty.
	Namespaces []string
	// Labels is a label selector in its text form; Name a metadata.name.
	Labels, Name string
}

// ForCache returns the barrier of type gvk in cache c, whose consistent
// reads go to the API server through api (a client that reads no cache) and
// give up after within (the webhook's timeout: no waiter waits longer).
func ForCache(api client.Reader, c cache.Cache, gvk schema.GroupVersionKind, newObj func() client.Object, sel Selection, within time.Duration) *Barrier {
	b := NewBarrier(gvk.Kind, &informerSource{api: api, c: c, gvk: gvk, newObj: newObj, sel: sel, changed: make(chan struct{})})
	if within > 0 {
		b.roundTimeout = within
	}
	return b
}

// pageSize bounds one page of the consistent read.
const pageSize = 500

type informerSource struct {
	api    client.Reader
	c      cache.Cache
	gvk    schema.GroupVersionKind
	newObj func() client.Object
	sel    Selection

	mu      sync.Mutex
	indexer toolscache.Indexer
	changed chan struct{}
}

// store is the informer's store, with a handler that reports its changes.
func (s *informerSource) store(ctx context.Context) (toolscache.Indexer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.indexer != nil {
		return s.indexer, nil
	}
	inf, err := s.c.GetInformer(ctx, s.newObj(), cache.BlockUntilSynced(false))
	if err != nil {
		return nil, err
	}
	ix, ok := inf.(interface{ GetIndexer() toolscache.Indexer })
	if !ok {
		return nil, fmt.Errorf("the informer of %s (%T) does not expose its store", s.gvk.Kind, inf)
	}
	notify := func() {
		s.mu.Lock()
		close(s.changed)
		s.changed = make(chan struct{})
		s.mu.Unlock()
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { notify() },
		UpdateFunc: func(any, any) { notify() },
		DeleteFunc: func(any) { notify() },
	}); err != nil {
		return nil, err
	}
	s.indexer = ix.GetIndexer()
	return s.indexer, nil
}

func (s *informerSource) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// Latest lists the type's metadata with no resourceVersion: a consistent
// read, page by page at the first page's resourceVersion.
func (s *informerSource) Latest(ctx context.Context) (Snapshot, error) {
	if _, err := s.store(ctx); err != nil {
		return Snapshot{}, err
	}
	opts := []client.ListOption{client.Limit(pageSize)}
	if s.sel.Labels != "" {
		ls, err := labels.Parse(s.sel.Labels)
		if err != nil {
			return Snapshot{}, err
		}
		opts = append(opts, client.MatchingLabelsSelector{Selector: ls})
	}
	if s.sel.Name != "" {
		opts = append(opts, client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", s.sel.Name)})
	}
	snap := Snapshot{Items: map[string]string{}}
	token := ""
	for {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(s.gvk.GroupVersion().WithKind(s.gvk.Kind + "List"))
		if err := s.api.List(ctx, list, append(opts, client.Continue(token))...); err != nil {
			return Snapshot{}, err
		}
		if snap.ResourceVersion == "" {
			snap.ResourceVersion = list.ResourceVersion
		}
		for i := range list.Items {
			it := &list.Items[i]
			if len(s.sel.Namespaces) > 0 && !slices.Contains(s.sel.Namespaces, it.Namespace) {
				continue
			}
			snap.Items[key(it.Namespace, it.Name)] = it.ResourceVersion
		}
		if token = list.Continue; token == "" {
			return snap, nil
		}
	}
}

// Caught reports whether the store has seen the snapshot's resourceVersion,
// or holds every listed object at its listed version or newer and none that
// the list no longer has, unless created after it.
func (s *informerSource) Caught(snap Snapshot) (bool, error) {
	ix, err := s.store(context.Background())
	if err != nil {
		return false, err
	}
	if seen := ix.LastStoreSyncResourceVersion(); seen != "" {
		if c, err := resourceversion.CompareResourceVersion(seen, snap.ResourceVersion); err == nil && c >= 0 {
			return true, nil
		}
	}
	for k, want := range snap.Items {
		obj, ok, err := ix.GetByKey(k)
		if err != nil || !ok {
			return false, err
		}
		if newer, err := atLeast(obj, want); err != nil || !newer {
			return false, err
		}
	}
	for _, k := range ix.ListKeys() {
		if _, listed := snap.Items[k]; listed {
			continue
		}
		obj, ok, err := ix.GetByKey(k)
		if err != nil {
			return false, err
		}
		if !ok {
			continue // deleted meanwhile
		}
		// Kept only if created after the list; otherwise its deletion has
		// not arrived yet.
		rv, err := rvOf(obj)
		if err != nil {
			return false, err
		}
		c, err := resourceversion.CompareResourceVersion(rv, snap.ResourceVersion)
		if err != nil || c <= 0 {
			return false, err
		}
	}
	return true, nil
}

func atLeast(obj any, want string) (bool, error) {
	rv, err := rvOf(obj)
	if err != nil {
		return false, err
	}
	c, err := resourceversion.CompareResourceVersion(rv, want)
	return c >= 0, err
}

func rvOf(obj any) (string, error) {
	o, ok := obj.(metav1.Object)
	if !ok {
		return "", fmt.Errorf("the cache holds %T, which has no metadata", obj)
	}
	return o.GetResourceVersion(), nil
}

func key(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}
