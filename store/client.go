package store

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/internal/serving/warming"
	"github.com/vigilkit/vigil/store/v1alpha1"
)

// MaxBytes bounds a Store object's data: etcd refuses requests over 1.5 MiB,
// and the API server's own overhead must fit beside the data.
const MaxBytes = 900 << 10

// Errors callers can branch on.
var (
	// ErrInvalidKey: a key is empty or has characters outside [-._a-zA-Z0-9].
	ErrInvalidKey = errors.New("invalid store key")
	// ErrTooLarge: a write would push the object over MaxBytes.
	ErrTooLarge = errors.New("store too large")
	// ErrCRDMissing: the Store CRD is not installed and could not be.
	ErrCRDMissing = errors.New("store CRD not installed")
	// ErrForbidden: RBAC does not allow what the Store needs.
	ErrForbidden = errors.New("store access forbidden")
	// ErrNotStarted: a write before Start.
	ErrNotStarted = errors.New("store not started")
)

var validKey = regexp.MustCompile(`^[-._a-zA-Z0-9]+$`)

// CheckKey reports, as ErrInvalidKey, what is wrong with a key a Store
// would refuse; nil for a valid one.
func CheckKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: expected a key matching [-._a-zA-Z0-9]+, got an empty string", ErrInvalidKey)
	}
	if !validKey.MatchString(key) {
		return fmt.Errorf("%w: expected a key matching [-._a-zA-Z0-9]+, got %q: use letters, digits, '-', '_' and '.'", ErrInvalidKey, key)
	}
	return nil
}

// Options configure a Client.
type Options struct {
	// Namespace and Name of the Store object: the module's namespace and name.
	Namespace string
	Name      string
	// Logger for what the store does in the background; from ctx when zero.
	Logger logr.Logger
}

// Stats count what a Client did, for benchmarks and diagnosis.
type Stats struct {
	Writes    int64 // updates and creates the API server accepted
	Batches   int64 // commits, each one or more writes of this replica
	Conflicts int64 // writes refused because another writer got in first
	Gone      int64 // watches that ended in 410 Gone and were relisted
}

// Client is one replica's connection to a module's Store: the local copy, the
// watch that feeds it and the writer that commits changes. It is the
// module-wide scope; Scope returns the scope of a capability.
type Client struct {
	scope
	c   client.WithWatch
	ns  string
	obj string
	log logr.Logger

	ops      chan *op
	started  atomic.Bool
	informer cache.SharedIndexInformer

	mu      sync.Mutex
	cur     *v1alpha1.Store // the latest version this replica's watch delivered; nil when none
	seenRV  string          // resourceVersion of the latest event, deletions included
	written *v1alpha1.Store // the latest version this replica wrote
	changed chan struct{}   // closed and replaced whenever seenRV moves
	subs    map[int]*subscriber
	nextSub int

	stats struct{ writes, batches, conflicts, gone atomic.Int64 }
}

type subscriber struct {
	prefix string
	fn     func(Change)
	batch  func([]Change)
}

// New returns a Client for the Store object opts names. Call Start before use.
func New(cfg *rest.Config, opts Options) (*Client, error) {
	if problems := validation.IsDNS1123Subdomain(opts.Name); len(problems) > 0 {
		return nil, fmt.Errorf("store: object name %q: %s", opts.Name, strings.Join(problems, "; "))
	}
	if problems := validation.IsDNS1123Label(opts.Namespace); len(problems) > 0 {
		return nil, fmt.Errorf("store: namespace %q: %s", opts.Namespace, strings.Join(problems, "; "))
	}
	// The client handles Stores and, to install their CRD, CRDs: nothing of
	// client-go's scheme is needed.
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	// The Store is read first thing at start: no second lost to a watch
	// cache the API server is still building (see internal/serving/warming).
	c, err := client.NewWithWatch(warming.Wrap(rest.CopyConfig(cfg)), client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("store: client: %w", err)
	}
	s := &Client{
		c:       c,
		ns:      opts.Namespace,
		obj:     opts.Name,
		log:     opts.Logger,
		ops:     make(chan *op, 1024),
		changed: make(chan struct{}),
		subs:    map[int]*subscriber{},
	}
	s.scope = scope{c: s}
	return s, nil
}

// Module is the module-wide scope: the client itself.
func (s *Client) Module() Reader { return s }

// Scope returns the store of one capability: its keys are its own, stored as
// "<capability>/<key>".
func (s *Client) Scope(capability string) Store {
	sc := scope{c: s, prefix: capability + "/"}
	if problems := validation.IsDNS1123Label(capability); len(problems) > 0 {
		sc.err = fmt.Errorf("store: scope %q is not a capability name: %s", capability, strings.Join(problems, "; "))
	}
	return sc
}

// Stats returns the client's counters.
func (s *Client) Stats() Stats {
	return Stats{
		Writes:    s.stats.writes.Load(),
		Batches:   s.stats.batches.Load(),
		Conflicts: s.stats.conflicts.Load(),
		Gone:      s.stats.gone.Load(),
	}
}

// Start makes sure the Store CRD is installed (installing it when allowed),
// starts the watch and the writer, and returns; both run until ctx ends. It
// does not wait for the first list: see WaitForSync.
func (s *Client) Start(ctx context.Context) error {
	if s.log.GetSink() == nil {
		s.log = logr.FromContextOrDiscard(ctx)
	}
	s.log = s.log.WithValues("store", s.ns+"/"+s.obj)
	if err := s.ensureCRD(ctx); err != nil {
		return err
	}
	byName := fields.OneTermEqualSelector("metadata.name", s.obj).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = byName
			// The first list reads the latest resourceVersion, not "0",
			// which a watch cache may answer a write behind: a client
			// started after a write (a gate phase's handoff to the main
			// container) sees it once synced. Where the API server
			// streams the first list (WatchList), that read is consistent
			// already.
			if o.ResourceVersion == "0" {
				o.ResourceVersion = ""
			}
			list := &v1alpha1.StoreList{}
			return list, s.c.List(ctx, list, &client.ListOptions{Namespace: s.ns, Raw: &o})
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = byName
			w, err := s.c.Watch(ctx, &v1alpha1.StoreList{}, &client.ListOptions{Namespace: s.ns, Raw: &o})
			if err != nil {
				if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
					s.stats.gone.Add(1)
				}
				return nil, err
			}
			// Count the 410s the reflector recovers from by relisting: it
			// does so quietly.
			return watch.Filter(w, func(ev watch.Event) (watch.Event, bool) {
				if st, ok := ev.Object.(*metav1.Status); ok && ev.Type == watch.Error && st.Code == http.StatusGone {
					s.stats.gone.Add(1)
				}
				return ev, true
			}), nil
		},
	}
	s.informer = cache.NewSharedIndexInformer(lw, &v1alpha1.Store{}, 0, cache.Indexers{})
	if _, err := s.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { s.observe(o, false) },
		UpdateFunc: func(_, o any) { s.observe(o, false) },
		DeleteFunc: func(o any) { s.observe(o, true) },
	}); err != nil {
		return err
	}
	go s.informer.RunWithContext(ctx)
	go s.writer(ctx)
	s.started.Store(true)
	return nil
}

// WaitForSync waits until the local copy reflects the first list.
func (s *Client) WaitForSync(ctx context.Context) error {
	if !s.started.Load() {
		return ErrNotStarted
	}
	if !cache.WaitForCacheSync(ctx.Done(), s.informer.HasSynced) {
		return fmt.Errorf("store %s/%s: wait for sync: %w", s.ns, s.obj, context.Cause(ctx))
	}
	return nil
}

// Synced reports whether the local copy reflects the first list, without
// waiting: for readiness probes.
func (s *Client) Synced() bool { return s.started.Load() && s.informer.HasSynced() }

// observe takes a version from the watch into the local copy and tells
// subscribers what changed.
func (s *Client) observe(o any, deleted bool) {
	if tomb, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = tomb.Obj
	}
	obj, ok := o.(*v1alpha1.Store)
	if !ok {
		return
	}
	rv := obj.ResourceVersion
	if deleted {
		// A deletion missed during a broken watch carries the object's last
		// version; the relist that found it gone is at least this far.
		if last := s.informer.LastSyncResourceVersion(); newer(last, rv) {
			rv = last
		}
	}
	s.mu.Lock()
	var before map[string]string
	if s.cur != nil {
		before = s.cur.Data
	}
	var after map[string]string
	if deleted {
		s.cur = nil
	} else {
		s.cur = obj
		after = obj.Data
	}
	if newer(rv, s.seenRV) {
		s.seenRV = rv
	}
	close(s.changed)
	s.changed = make(chan struct{})
	subs := make([]*subscriber, 0, len(s.subs))
	for _, id := range sortedKeys(s.subs) {
		subs = append(subs, s.subs[id])
	}
	s.mu.Unlock()

	changes := diff(before, after)
	for _, sub := range subs {
		var batch []Change
		for _, ch := range changes {
			if k, ok := sub.inScope(ch.Key); ok {
				ch.Key = k
				if sub.batch != nil {
					batch = append(batch, ch)
				} else {
					sub.fn(ch)
				}
			}
		}
		if len(batch) > 0 {
			sub.batch(batch)
		}
	}
}

func (sub *subscriber) inScope(key string) (string, bool) {
	return inScope(sub.prefix, key)
}

// inScope reports whether a stored key belongs to the scope of prefix, and its
// name there. The module-wide scope (no prefix) holds the keys without a slash.
func inScope(prefix, key string) (string, bool) {
	if prefix == "" {
		return key, !strings.Contains(key, "/")
	}
	k, ok := strings.CutPrefix(key, prefix)
	return k, ok
}

// diff lists the changes from one version of the data to the next, by key.
func diff(before, after map[string]string) []Change {
	var out []Change
	for k, v := range after {
		if old, ok := before[k]; !ok || old != v {
			out = append(out, Change{Key: k, Value: v})
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			out = append(out, Change{Key: k, Removed: true})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// waitSeen waits until the watch has delivered resourceVersion rv or later.
func (s *Client) waitSeen(ctx context.Context, rv string) error {
	for {
		s.mu.Lock()
		seen, ch := s.seenRV, s.changed
		s.mu.Unlock()
		if seen == rv || newer(seen, rv) {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("store %s/%s: wait for version %s (seen %s): %w", s.ns, s.obj, rv, seen, context.Cause(ctx))
		}
	}
}

// newer reports whether resourceVersion a is later than b. Versions are
// compared as the API server defines them; one that is not well formed is
// never newer.
func newer(a, b string) bool {
	if b == "" {
		return a != ""
	}
	c, err := resourceversion.CompareResourceVersion(a, b)
	return err == nil && c > 0
}

func sortedKeys[V any](m map[int]V) []int {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	return keys
}

// scope is a view of the store under a key prefix.
type scope struct {
	c      *Client
	prefix string
	err    error
}

// Module is the module-wide scope of the scope's client.
func (sc scope) Module() Reader { return sc.c }

var _ Store = scope{}

func (sc scope) key(key string) (string, error) {
	if sc.err != nil {
		return "", sc.err
	}
	if err := CheckKey(key); err != nil {
		return "", err
	}
	return sc.prefix + key, nil
}

func (sc scope) Get(key string) (string, bool, error) {
	k, err := sc.key(key)
	if err != nil {
		return "", false, err
	}
	sc.c.mu.Lock()
	defer sc.c.mu.Unlock()
	if sc.c.cur == nil {
		return "", false, nil
	}
	v, ok := sc.c.cur.Data[k]
	return v, ok, nil
}

func (sc scope) Keys() ([]string, error) {
	sc.c.mu.Lock()
	defer sc.c.mu.Unlock()
	var keys []string
	if sc.c.cur != nil {
		for k := range sc.c.cur.Data {
			if name, ok := inScope(sc.prefix, k); ok {
				keys = append(keys, name)
			}
		}
	}
	sort.Strings(keys)
	return keys, nil
}

func (sc scope) Set(ctx context.Context, key, value string) error {
	_, err := sc.write(ctx, key, setTo(value))
	return err
}

func (sc scope) SetAndWait(ctx context.Context, key, value string) error {
	rv, err := sc.write(ctx, key, setTo(value))
	if err != nil {
		return err
	}
	return sc.c.waitSeen(ctx, rv)
}

func (sc scope) Update(ctx context.Context, key string, fn func(string, bool) (string, error)) error {
	_, err := sc.write(ctx, key, func(old string, found bool) (string, bool, error) {
		v, err := fn(old, found)
		return v, true, err
	})
	return err
}

func (sc scope) Remove(ctx context.Context, key string) error {
	_, err := sc.write(ctx, key, remove)
	return err
}

func (sc scope) RemoveAndWait(ctx context.Context, key string) error {
	rv, err := sc.write(ctx, key, remove)
	if err != nil {
		return err
	}
	return sc.c.waitSeen(ctx, rv)
}

func (sc scope) Subscribe(fn func(Change)) (func(), error) {
	return sc.subscribe(&subscriber{prefix: sc.prefix, fn: fn})
}

func (sc scope) SubscribeBatch(fn func([]Change)) (func(), error) {
	return sc.subscribe(&subscriber{prefix: sc.prefix, batch: fn})
}

// Clear removes every key of the scope in one write, and waits until the
// local copy has them gone.
func (sc scope) Clear(ctx context.Context) error {
	if sc.err != nil {
		return sc.err
	}
	if !sc.c.started.Load() {
		return ErrNotStarted
	}
	o := &op{ctx: ctx, name: "*", done: make(chan struct{}), clear: func(key string) bool {
		name, ok := inScope(sc.prefix, key)
		return ok && !(sc.prefix == "" && strings.HasPrefix(name, ReservedPrefix))
	}}
	select {
	case sc.c.ops <- o:
	case <-ctx.Done():
		return fmt.Errorf("store: clear: %w", context.Cause(ctx))
	}
	select {
	case <-o.done:
		if o.err != nil {
			return fmt.Errorf("store: clear: %w", o.err)
		}
	case <-ctx.Done():
		return fmt.Errorf("store: clear: %w", context.Cause(ctx))
	}
	if o.rv == "" {
		return nil // nothing to clear
	}
	return sc.c.waitSeen(ctx, o.rv)
}

func (sc scope) subscribe(sub *subscriber) (func(), error) {
	s := sc.c
	s.mu.Lock()
	id := s.nextSub
	s.nextSub++
	s.subs[id] = sub
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			delete(s.subs, id)
			s.mu.Unlock()
		})
	}, nil
}

func (sc scope) WaitForSync(ctx context.Context) error { return sc.c.WaitForSync(ctx) }

func setTo(value string) mutation {
	return func(string, bool) (string, bool, error) { return value, true, nil }
}

func remove(string, bool) (string, bool, error) { return "", false, nil }

// write queues a mutation of one key for the writer and waits for its commit.
// It returns the resourceVersion that holds the result.
func (sc scope) write(ctx context.Context, key string, m mutation) (string, error) {
	k, err := sc.key(key)
	if err != nil {
		return "", err
	}
	if !sc.c.started.Load() {
		return "", ErrNotStarted
	}
	o := &op{ctx: ctx, key: k, name: key, mutate: m, done: make(chan struct{})}
	select {
	case sc.c.ops <- o:
	case <-ctx.Done():
		return "", fmt.Errorf("store: write %q: %w", key, context.Cause(ctx))
	}
	select {
	case <-o.done:
		return o.rv, o.err
	case <-ctx.Done():
		return "", fmt.Errorf("store: write %q: %w", key, context.Cause(ctx))
	}
}

// Deadline of a single API call of the writer, so that a hung connection is
// given up and retried rather than waited on forever.
const callTimeout = 10 * time.Second
