package store_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/internal/testsupport/testkit"
	"github.com/vigilkit/vigil/store"
	"github.com/vigilkit/vigil/store/v1alpha1"
	"github.com/vigilkit/vigil/vigiltest"
)

var env *vigiltest.Env

func TestMain(m *testing.M) {
	code := vigiltest.Run(m, vigiltest.Options{Scheme: scheme()}, &env)
	printBenchSummary()
	os.Exit(code)
}

// scheme is client-go's plus the Store's types.
func scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// start returns a started, synced Store client for object "m" in ns.
func start(t testing.TB, cfg *rest.Config, ns string) *store.Client {
	t.Helper()
	s, err := store.New(cfg, store.Options{Namespace: ns, Name: "m"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	syncCtx, done := context.WithTimeout(ctx, 30*time.Second)
	defer done()
	if err := s.WaitForSync(syncCtx); err != nil {
		t.Fatal(err)
	}
	return s
}

// Two replicas × 8 goroutines × 500 read-modify-write increments of one key:
// every increment counts.
func TestConcurrentUpdatesLoseNothing(t *testing.T) {
	ns := env.Namespace(t)
	replicas := []*store.Client{start(t, env.Config, ns), start(t, env.Config, ns)}
	const goroutines, increments = 8, 500
	var wg sync.WaitGroup
	errs := make(chan error, len(replicas)*goroutines)
	for _, r := range replicas {
		for range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range increments {
					err := r.Update(t.Context(), "count", func(old string, found bool) (string, error) {
						n := 0
						if found {
							var err error
							if n, err = strconv.Atoi(old); err != nil {
								return "", err
							}
						}
						return strconv.Itoa(n + 1), nil
					})
					if err != nil {
						errs <- err
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	want := strconv.Itoa(len(replicas) * goroutines * increments)
	obj := &v1alpha1.Store{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "m"}, obj); err != nil {
		t.Fatal(err)
	}
	if got := obj.Data["count"]; got != want {
		t.Fatalf("count = %s on the API server, want %s", got, want)
	}
	for i, r := range replicas {
		st := r.Stats()
		t.Logf("replica %d: %d writes in %d batches, %d conflicts", i, st.Writes, st.Batches, st.Conflicts)
	}
}

// SetAndWait on one replica reaches the other's local copy; subscribers see the
// final value of every key that changed, and removals.
func TestSetAndWaitReachesOtherReplicaAndSubscribers(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	a, b := start(t, env.Config, ns), start(t, env.Config, ns)
	seen := newRecorder()
	defer subscribe(t, b, seen.record)()

	if err := a.SetAndWait(ctx, "initialClusterConfig", `{"name":"initial"}`); err != nil {
		t.Fatal(err)
	}
	if v, ok := get(t, a, "initialClusterConfig"); !ok || v != `{"name":"initial"}` {
		t.Fatalf("after SetAndWait, a.Get = %q, %v; want the value (read-your-writes)", v, ok)
	}
	for i := range 20 {
		if err := a.Set(ctx, "k"+strconv.Itoa(i%4), strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.RemoveAndWait(ctx, "k3"); err != nil {
		t.Fatal(err)
	}
	if _, ok := get(t, a, "k3"); ok {
		t.Fatal("k3 still in a's copy after RemoveAndWait")
	}
	want := map[string]string{"initialClusterConfig": `{"name":"initial"}`, "k0": "16", "k1": "17", "k2": "18"}
	seen.waitFor(t, want)
	for k, v := range want {
		if got, ok := get(t, b, k); !ok || got != v {
			t.Errorf("get(t, b, %q) = %q, %v; want %q", k, got, ok, v)
		}
	}
	if keys := keys(t, b); strings.Join(keys, ",") != "initialClusterConfig,k0,k1,k2" {
		t.Errorf("keys(t, b) = %v", keys)
	}
}

// A Store client started after a write sees it once synced, as a gate
// phase's handoff needs: the phase writes and exits, the main container
// starts and reads. Its first read of the Store is consistent, never
// resourceVersion "0", which the API server may answer from a watch cache a
// write behind: a stream from the latest resourceVersion where WatchList is
// served, a list at the latest one where it is not (1.33).
func TestAClientStartedAfterAWriteSeesIt(t *testing.T) {
	ns := env.Namespace(t)
	a := start(t, env.Config, ns)
	cfg, reads := testkit.RecordReads(env.Config, "/namespaces/"+ns+"/stores")
	for i := range 5 {
		want := strconv.Itoa(i)
		if err := a.SetAndWait(t.Context(), "handoff", want); err != nil {
			t.Fatal(err)
		}
		reads.Reset()
		b := start(t, cfg, ns)
		if got, ok := get(t, b, "handoff"); !ok || got != want {
			t.Fatalf("client %d, started after the write of %q, read %q, %v", i, want, got, ok)
		}
		if why := reads.NotConsistent(); why != "" {
			t.Fatalf("client %d: %s", i, why)
		}
	}
}

// A write that changes nothing returns at once and writes nothing.
func TestNoOpWriteReturnsAtOnce(t *testing.T) {
	ctx := t.Context()
	s := start(t, env.Config, env.Namespace(t))
	if err := s.SetAndWait(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	before := s.Stats().Writes
	for range 3 {
		if err := s.SetAndWait(ctx, "k", "v"); err != nil {
			t.Fatal(err)
		}
		if err := s.RemoveAndWait(ctx, "absent"); err != nil {
			t.Fatal(err)
		}
	}
	if after := s.Stats().Writes; after != before {
		t.Fatalf("no-op writes made %d API writes, want 0", after-before)
	}
}

// Someone deletes the Store object: subscribers are told its keys are gone,
// and the next write creates it again.
func TestDeletedObjectIsRecreated(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	s := start(t, env.Config, ns)
	seen := newRecorder()
	defer subscribe(t, s, seen.record)()
	for _, k := range []string{"a", "b"} {
		if err := s.SetAndWait(ctx, k, "1"); err != nil {
			t.Fatal(err)
		}
	}
	seen.waitFor(t, map[string]string{"a": "1", "b": "1"})
	if err := env.Client.Delete(ctx, &v1alpha1.Store{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "m"}}); err != nil {
		t.Fatal(err)
	}
	seen.waitFor(t, map[string]string{})
	if len(keys(t, s)) != 0 {
		t.Fatalf("keys %v after the object was deleted", keys(t, s))
	}
	if err := s.SetAndWait(ctx, "c", "2"); err != nil {
		t.Fatalf("write after deletion: %v", err)
	}
	seen.waitFor(t, map[string]string{"c": "2"})
	obj := &v1alpha1.Store{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "m"}, obj); err != nil {
		t.Fatalf("the object was not recreated: %v", err)
	}
	if len(obj.Data) != 1 || obj.Data["c"] != "2" || obj.Status.Keys != 1 {
		t.Fatalf("recreated object data %v status %+v, want only c=2", obj.Data, obj.Status)
	}
}

// Capabilities have scopes of their own; the module-wide scope holds the rest.
func TestScopesKeepKeysApart(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	s := start(t, env.Config, ns)
	policies := s.Scope("policies")
	seen := newRecorder()
	defer subscribe(t, policies, seen.record)()
	if err := s.SetAndWait(ctx, "mode", "module"); err != nil {
		t.Fatal(err)
	}
	if err := policies.SetAndWait(ctx, "mode", "policies"); err != nil {
		t.Fatal(err)
	}
	if v, _ := get(t, s, "mode"); v != "module" {
		t.Errorf("module-wide mode = %q", v)
	}
	if v, _ := get(t, policies, "mode"); v != "policies" {
		t.Errorf("policies mode = %q", v)
	}
	if k := keys(t, s); len(k) != 1 || k[0] != "mode" {
		t.Errorf("module-wide keys %v, want [mode]", k)
	}
	seen.waitFor(t, map[string]string{"mode": "policies"})
	obj := &v1alpha1.Store{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "m"}, obj); err != nil {
		t.Fatal(err)
	}
	if obj.Data["policies/mode"] != "policies" {
		t.Fatalf("stored data %v, want the capability's key under policies/", obj.Data)
	}
	if err := s.Scope("Not A Capability").Set(ctx, "k", "v"); err == nil || !strings.Contains(err.Error(), "is not a capability name") {
		t.Fatalf("write to a badly named scope: err = %v", err)
	}
}

func TestJSONHelpers(t *testing.T) {
	ctx := t.Context()
	s := start(t, env.Config, env.Namespace(t))
	type exemption struct {
		Namespace string   `json:"namespace"`
		Policies  []string `json:"policies"`
	}
	want := exemption{Namespace: "apps", Policies: []string{"privileged"}}
	if err := store.SetJSONAndWait(ctx, s, "exemption", want); err != nil {
		t.Fatal(err)
	}
	got, found, err := store.GetJSON[exemption](s, "exemption")
	if err != nil || !found || got.Namespace != want.Namespace || len(got.Policies) != 1 {
		t.Fatalf("GetJSON = %+v, %v, %v; want %+v", got, found, err, want)
	}
	if err := s.SetAndWait(ctx, "broken", "{not json"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := store.GetJSON[exemption](s, "broken"); err == nil || !strings.Contains(err.Error(), `decode key "broken"`) {
		t.Fatalf("GetJSON of bad JSON: err = %v", err)
	}
}

// Bad input fails with a clear error, and nothing is written.
func TestBadInputWritesNothing(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	s := start(t, env.Config, ns)
	if err := s.SetAndWait(ctx, "keep", "me"); err != nil {
		t.Fatal(err)
	}
	writes := s.Stats().Writes
	huge := strings.Repeat("x", store.MaxBytes)
	for _, tc := range []struct {
		name  string
		write func() error
		is    error
		want  []string
	}{
		{"empty key", func() error { return s.Set(ctx, "", "v") }, store.ErrInvalidKey, []string{"got an empty string"}},
		{"bad key", func() error { return s.Set(ctx, "a/b", "v") }, store.ErrInvalidKey, []string{`got "a/b"`, "[-._a-zA-Z0-9]+"}},
		{"bad key with space", func() error { return s.Update(ctx, "a b", func(string, bool) (string, error) { return "", nil }) }, store.ErrInvalidKey, []string{`"a b"`}},
		{"too large", func() error { return s.Set(ctx, "big", huge) }, store.ErrTooLarge, []string{`key "big"`, fmt.Sprintf("to %d bytes", len(huge)), "over the limit of 921600"}},
		{"update error", func() error {
			return s.Update(ctx, "keep", func(string, bool) (string, error) { return "", errors.New("handler refused") })
		}, nil, []string{"handler refused"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.write()
			if err == nil {
				t.Fatal("write succeeded, want an error")
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("err = %v, want %v", err, tc.is)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %q, want it to contain %q", err, w)
				}
			}
		})
	}
	// A too-large write fails alone: the writes committed with it land.
	var wg sync.WaitGroup
	results := make([]error, 3)
	for i, kv := range [][2]string{{"small1", "a"}, {"big", huge}, {"small2", "b"}} {
		wg.Add(1)
		go func() { defer wg.Done(); results[i] = s.SetAndWait(ctx, kv[0], kv[1]) }()
	}
	wg.Wait()
	if results[0] != nil || results[2] != nil || !errors.Is(results[1], store.ErrTooLarge) {
		t.Fatalf("mixed batch results %v: want only the large write to fail", results)
	}
	if _, ok := get(t, s, "big"); ok {
		t.Fatal("the too-large key was written")
	}
	if v, _ := get(t, s, "keep"); v != "me" {
		t.Fatalf("keep = %q after failed writes, want me", v)
	}
	if got := s.Stats().Writes - writes; got > 2 {
		t.Fatalf("%d API writes, want at most the two small keys'", got)
	}
}

// Without RBAC for Stores, the error names the verb, the resource, the
// namespace and the rule to add.
func TestForbiddenNamesTheRule(t *testing.T) {
	ns := env.Namespace(t)
	start(t, env.Config, ns) // the CRD is installed by an admin first
	s, err := store.New(env.AsServiceAccountConfig(ns, "module"), store.Options{Namespace: ns, Name: "m"})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Start(t.Context())
	if !errors.Is(err, store.ErrForbidden) {
		t.Fatalf("Start as an unprivileged ServiceAccount: err = %v, want ErrForbidden", err)
	}
	for _, w := range []string{"list stores.vigil.dev", fmt.Sprintf("namespace %q", ns), "resources: [stores]", "verbs: [get, list, watch, create, update]"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("err = %q, want it to contain %q", err, w)
		}
	}
}

// A replica that may read but not write Stores says which verb it lacks.
func TestForbiddenWriteNamesTheVerb(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	admin := start(t, env.Config, ns)
	if err := admin.SetAndWait(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "read-stores"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"vigil.dev"}, Resources: []string{"stores"}, Verbs: []string{"get", "list", "watch"}}},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "read-stores"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "reader"}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	var reader *store.Client
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, err := store.New(env.AsServiceAccountConfig(ns, "reader"), store.Options{Namespace: ns, Name: "m"})
		if err != nil {
			t.Fatal(err)
		}
		startCtx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		if err = s.Start(startCtx); err == nil {
			reader = s
			break
		}
		cancel()
		if !errors.Is(err, store.ErrForbidden) || time.Now().After(deadline) {
			t.Fatalf("start reader: %v", err)
		}
		time.Sleep(50 * time.Millisecond) // the authorizer's informers catch up with the new binding
	}
	if err := reader.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	if v, _ := get(t, reader, "k"); v != "v" {
		t.Fatalf("reader sees k = %q, want v", v)
	}
	err := reader.Set(ctx, "k", "w")
	if !errors.Is(err, store.ErrForbidden) {
		t.Fatalf("Set as a reader: err = %v, want ErrForbidden", err)
	}
	for _, w := range []string{"update stores.vigil.dev", fmt.Sprintf("namespace %q", ns)} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("err = %q, want it to contain %q", err, w)
		}
	}
}

func TestWriteIntoMissingNamespace(t *testing.T) {
	s := start(t, env.Config, "no-such-namespace-"+strings.ToLower(strconv.FormatInt(time.Now().UnixNano()%1e6, 36)))
	err := s.Set(t.Context(), "k", "v")
	if err == nil || !strings.Contains(err.Error(), "does not exist") || !apierrors.IsNotFound(errors.Unwrap(err)) {
		t.Fatalf("err = %v, want one saying the namespace does not exist", err)
	}
}

func TestWriteBeforeStart(t *testing.T) {
	s, err := store.New(env.Config, store.Options{Namespace: "default", Name: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Set(t.Context(), "k", "v"); !errors.Is(err, store.ErrNotStarted) {
		t.Fatalf("err = %v, want ErrNotStarted", err)
	}
}

// recorder rebuilds the state of a scope from the changes it is told of.
type recorder struct {
	mu      sync.Mutex
	state   map[string]string
	changed chan struct{}
}

func newRecorder() *recorder {
	return &recorder{state: map[string]string{}, changed: make(chan struct{}, 1)}
}

func (r *recorder) record(c store.Change) {
	r.mu.Lock()
	if c.Removed {
		delete(r.state, c.Key)
	} else {
		r.state[c.Key] = c.Value
	}
	r.mu.Unlock()
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

func (r *recorder) snapshot() map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.state)
}

// waitFor waits until the recorded state is exactly want.
func (r *recorder) waitFor(t testing.TB, want map[string]string) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		if got := r.snapshot(); maps.Equal(got, want) {
			return
		}
		select {
		case <-r.changed:
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatalf("subscriber state %v, want %v", r.snapshot(), want)
		}
	}
}

// get reads a key and fails the test if the read fails.
func get(t testing.TB, s store.Reader, key string) (string, bool) {
	t.Helper()
	v, ok, err := s.Get(key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	return v, ok
}

// keys lists the keys and fails the test if that fails.
func keys(t testing.TB, s store.Reader) []string {
	t.Helper()
	k, err := s.Keys()
	if err != nil {
		t.Fatalf("Keys(): %v", err)
	}
	return k
}

// subscribe subscribes fn and fails the test if that fails.
func subscribe(t testing.TB, s store.Store, fn func(store.Change)) func() {
	t.Helper()
	unsubscribe, err := s.Subscribe(fn)
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	return unsubscribe
}

// A lazy Store that cannot connect says so from every method, reads
// included, and connects once the cause is gone.
func TestLazyReturnsConnectionErrors(t *testing.T) {
	ns := env.Namespace(t)
	start(t, env.Config, ns) // the CRD is installed by an admin first
	cfg := env.AsServiceAccountConfig(ns, "lazy")
	s := store.NewLazy(t.Context(), cfg, store.Options{Namespace: ns, Name: "m"})
	if _, _, err := s.Get("k"); !errors.Is(err, store.ErrForbidden) {
		t.Fatalf("Get without RBAC: err = %v, want ErrForbidden", err)
	}
	if _, err := s.Scope("policies").Keys(); !errors.Is(err, store.ErrForbidden) {
		t.Fatalf("Keys without RBAC: err = %v, want ErrForbidden", err)
	}
	if _, err := s.Subscribe(func(store.Change) {}); !errors.Is(err, store.ErrForbidden) {
		t.Fatalf("Subscribe without RBAC: err = %v, want ErrForbidden", err)
	}
	if err := s.Set(t.Context(), "k", "v"); !errors.Is(err, store.ErrForbidden) {
		t.Fatalf("Set without RBAC: err = %v, want ErrForbidden", err)
	}

	for _, o := range []client.Object{
		&rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lazy-stores"},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"vigil.dev"}, Resources: []string{"stores"}, Verbs: []string{"get", "list", "watch", "create", "update"}}},
		},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lazy-stores"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "lazy-stores"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "lazy"}},
		},
	} {
		if err := env.Client.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
	// RBAC reaches the authorizer's cache within a moment.
	vigiltest.Eventually(t, 20*time.Second, func() error { return s.SetAndWait(t.Context(), "k", "v") })
	if v, ok := get(t, s, "k"); !ok || v != "v" {
		t.Fatalf("Get after the grant = %q, %v; want \"v\", true", v, ok)
	}
}

// Clear empties a scope and nothing else: another capability's keys stay,
// and in the module-wide scope vigil's own keys stay. A batch subscriber
// hears the whole Clear in one call.
func TestClearEmptiesOneScopeInOneBatch(t *testing.T) {
	ctx := t.Context()
	s := start(t, env.Config, env.Namespace(t))
	policies, other := s.Scope("policies"), s.Scope("other")
	for _, kv := range [][2]string{{"a", "1"}, {"b", "2"}, {"c", "3"}} {
		if err := policies.Set(ctx, kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range []struct {
		s   store.Store
		key string
	}{{other, "keep"}, {s, "mine"}, {s, store.ReservedPrefix + "schedule.tick"}} {
		if err := w.s.SetAndWait(ctx, w.key, "x"); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var batches [][]store.Change
	unsubscribe, err := policies.SubscribeBatch(func(ch []store.Change) {
		mu.Lock()
		batches = append(batches, ch)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer unsubscribe()
	if err := policies.Clear(ctx); err != nil {
		t.Fatal(err)
	}
	if k := keys(t, policies); len(k) != 0 {
		t.Errorf("policies keys after Clear: %v", k)
	}
	if k := keys(t, other); len(k) != 1 {
		t.Errorf("another scope's keys after policies' Clear: %v, want [keep]", k)
	}
	mu.Lock()
	if len(batches) != 1 || len(batches[0]) != 3 || !batches[0][0].Removed || batches[0][0].Key != "a" {
		t.Errorf("batches heard: %+v; want one of the three removals, in key order", batches)
	}
	mu.Unlock()
	if err := s.Clear(ctx); err != nil {
		t.Fatal(err)
	}
	if k := keys(t, s); len(k) != 1 || k[0] != store.ReservedPrefix+"schedule.tick" {
		t.Errorf("module-wide keys after Clear: %v, want vigil's own only", k)
	}
	if k := keys(t, other); len(k) != 1 {
		t.Errorf("a capability's keys after the module-wide Clear: %v, want [keep]", k)
	}
}
