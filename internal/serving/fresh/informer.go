package fresh

import (
	"context"
	"fmt"
	"slices"
	"strings"
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

// Key names the informer a barrier catches up: its type, and whether it
// holds each object's metadata alone (vigil.Metadata). A kind read both
// ways has an informer, and a barrier, each way.
type Key struct {
	GVK      schema.GroupVersionKind
	Metadata bool
}

// Set holds a role's barriers, one per lister informer.
type Set map[Key]*Barrier

// For is the barrier of a type's informer, whole or metadata; nil when
// there is none.
func (s Set) For(gvk schema.GroupVersionKind, metadata bool) *Barrier {
	return s[Key{GVK: gvk, Metadata: metadata}]
}

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
	// seen is, for a cache limited to namespaces (one informer per
	// namespace behind the cache's, with no store of its own), each
	// object's resourceVersion as the informers' event handler last saw
	// it: the handler runs after the store has changed, so the store holds
	// what seen holds or newer.
	seen map[string]string
	// hooked is whether the event handler is registered.
	hooked bool
}

// namespaced reports whether the cache is limited to some namespaces.
func (s *informerSource) namespaced() bool { return len(s.sel.Namespaces) > 0 }

// store is the informer's store (nil for a cache limited to namespaces,
// which keeps seen instead), with a handler that reports its changes.
func (s *informerSource) store(ctx context.Context) (toolscache.Indexer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hooked {
		return s.indexer, nil
	}
	inf, err := s.c.GetInformer(ctx, s.newObj(), cache.BlockUntilSynced(false))
	if err != nil {
		return nil, err
	}
	var ix toolscache.Indexer
	if !s.namespaced() {
		withStore, ok := inf.(interface{ GetIndexer() toolscache.Indexer })
		if !ok {
			return nil, fmt.Errorf("the informer of %s (%T) does not expose its store", s.gvk.Kind, inf)
		}
		ix = withStore.GetIndexer()
	} else {
		s.seen = map[string]string{}
	}
	// notify records what the handler saw (for a namespaced cache) and
	// reports the change.
	notify := func(obj any, deleted bool) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.seen != nil {
			s.see(obj, deleted)
		}
		close(s.changed)
		s.changed = make(chan struct{})
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { notify(obj, false) },
		UpdateFunc: func(_, obj any) { notify(obj, false) },
		DeleteFunc: func(obj any) { notify(obj, true) },
	}); err != nil {
		return nil, err
	}
	s.indexer, s.hooked = ix, true
	return s.indexer, nil
}

// see records one event of a namespaced cache; s.mu is held.
func (s *informerSource) see(obj any, deleted bool) {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		delete(s.seen, tomb.Key)
		return
	}
	o, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	k := key(o.GetNamespace(), o.GetName())
	if deleted {
		delete(s.seen, k)
		return
	}
	s.seen[k] = o.GetResourceVersion()
}

func (s *informerSource) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// Latest lists the metadata of scope with no resourceVersion: a consistent
// read, page by page at the first page's resourceVersion. It selects what
// the informer selects and, within that, the scope: a read of one object
// lists its name in its namespace, a read of a namespace lists that
// namespace, so the round trip costs what the decision read, not what the
// type holds cluster-wide.
func (s *informerSource) Latest(ctx context.Context, scope Scope) (Snapshot, error) {
	if _, err := s.store(ctx); err != nil {
		return Snapshot{}, err
	}
	if s.namespaced() {
		// What the event handler records has no labels to select on, so a
		// scope here is its namespace and name: a superset of the read.
		scope.Labels = ""
	}
	opts := []client.ListOption{client.Limit(pageSize)}
	if sel := andSelectors(s.sel.Labels, scope.Labels); sel != "" {
		ls, err := labels.Parse(sel)
		if err != nil {
			return Snapshot{}, err
		}
		opts = append(opts, client.MatchingLabelsSelector{Selector: ls})
	}
	var names []string
	for _, n := range []string{s.sel.Name, scope.Name} {
		if n != "" {
			names = append(names, fields.OneTermEqualSelector("metadata.name", n).String())
		}
	}
	if len(names) > 0 {
		fs, err := fields.ParseSelector(andSelectors(names...))
		if err != nil {
			return Snapshot{}, err
		}
		opts = append(opts, client.MatchingFieldsSelector{Selector: fs})
	}
	snap := Snapshot{Items: map[string]string{}, Scope: scope}
	if !s.namespaced() {
		if scope.Namespace != "" {
			opts = append(opts, client.InNamespace(scope.Namespace))
		}
		_, err := s.list(ctx, &snap, opts)
		return snap, err
	}
	// One list per namespace, as the cache watches them (and as RBAC
	// allows: a Role in each, no cluster-wide list); of the scope's alone
	// when it names one.
	snap.Namespaces = map[string]string{}
	for _, ns := range s.sel.Namespaces {
		if scope.Namespace != "" && ns != scope.Namespace {
			continue
		}
		rv, err := s.list(ctx, &snap, append(slices.Clip(opts), client.InNamespace(ns)))
		if err != nil {
			return Snapshot{}, err
		}
		snap.Namespaces[ns] = rv
		if snap.ResourceVersion == "" {
			snap.ResourceVersion = rv
		}
	}
	return snap, nil
}

// list adds the items of one consistent list, page by page, to snap, and
// returns the resourceVersion it was read at; it sets snap's when unset.
func (s *informerSource) list(ctx context.Context, snap *Snapshot, opts []client.ListOption) (string, error) {
	token, rv := "", ""
	for {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(s.gvk.GroupVersion().WithKind(s.gvk.Kind + "List"))
		if err := s.api.List(ctx, list, append(slices.Clip(opts), client.Continue(token))...); err != nil {
			return "", err
		}
		if rv == "" {
			rv = list.ResourceVersion
		}
		if snap.ResourceVersion == "" && !s.namespaced() {
			snap.ResourceVersion = rv
		}
		for i := range list.Items {
			it := &list.Items[i]
			snap.Items[key(it.Namespace, it.Name)] = it.ResourceVersion
		}
		if token = list.Continue; token == "" {
			return rv, nil
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
	if s.namespaced() {
		return s.caughtNamespaced(snap)
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
	held, err := inScope(ix, snap.Scope)
	if err != nil {
		return false, err
	}
	for _, obj := range held {
		o, ok := obj.(metav1.Object)
		if !ok {
			return false, fmt.Errorf("the cache holds %T, which has no metadata", obj)
		}
		if _, listed := snap.Items[key(o.GetNamespace(), o.GetName())]; listed {
			continue
		}
		// Kept only if created after the list; otherwise its deletion has
		// not arrived yet.
		c, err := resourceversion.CompareResourceVersion(o.GetResourceVersion(), snap.ResourceVersion)
		if err != nil || c <= 0 {
			return false, err
		}
	}
	return true, nil
}

// inScope is what the store holds in scope: one object by key when the
// scope names an object of a namespace (or of no namespace, for a
// cluster-scoped kind), a namespace's objects from the store's namespace
// index, else every object, each matched against the scope.
func inScope(ix toolscache.Indexer, scope Scope) ([]any, error) {
	var held []any
	switch {
	case scope.Name != "":
		obj, ok, err := ix.GetByKey(key(scope.Namespace, scope.Name))
		if err != nil || !ok {
			return nil, err
		}
		held = []any{obj}
	case scope.Namespace != "":
		objs, err := ix.ByIndex(toolscache.NamespaceIndex, scope.Namespace)
		if err != nil {
			objs = ix.List() // a store without the index
		}
		held = objs
	default:
		held = ix.List()
	}
	if scope.Whole() {
		return held, nil
	}
	var sel labels.Selector
	if scope.Labels != "" {
		var err error
		if sel, err = labels.Parse(scope.Labels); err != nil {
			return nil, err
		}
	}
	return slices.DeleteFunc(held, func(obj any) bool {
		o, ok := obj.(metav1.Object)
		return ok && !scope.matches(o.GetNamespace(), o.GetName(), o.GetLabels(), sel)
	}), nil
}

// caughtNamespaced is Caught for a cache limited to namespaces, on what its
// event handler has seen: every listed object at its listed version or
// newer, and none the lists no longer have unless created after its
// namespace's list.
func (s *informerSource) caughtNamespaced(snap Snapshot) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, want := range snap.Items {
		rv, ok := s.seen[k]
		if !ok {
			return false, nil
		}
		if c, err := resourceversion.CompareResourceVersion(rv, want); err != nil || c < 0 {
			return false, err
		}
	}
	for k, rv := range s.seen {
		if _, listed := snap.Items[k]; listed {
			continue
		}
		ns, name, _ := strings.Cut(k, "/")
		since, ok := snap.Namespaces[ns]
		if !ok {
			continue // not a namespace the lists read
		}
		if snap.Scope.Name != "" && name != snap.Scope.Name {
			continue // not the object read
		}
		if c, err := resourceversion.CompareResourceVersion(rv, since); err != nil || c <= 0 {
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
