package fresh_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigilkit/vigil/internal/serving/fresh"
)

// fakeSource is an API server whose state is a version number and a cache
// that holds some version of it.
type fakeSource struct {
	server atomic.Int64 // the API server's current version
	mu     sync.Mutex
	cache  int64
	change chan struct{}

	release  chan struct{} // when set, each Latest waits for a receive
	inflight atomic.Int64
	maxIn    atomic.Int64
	fail     error
	read     []fresh.Scope // the scopes read, in order
}

func (f *fakeSource) scopes() []fresh.Scope {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.read)
}

func newFake() *fakeSource { return &fakeSource{change: make(chan struct{})} }

func (f *fakeSource) Latest(ctx context.Context, scope fresh.Scope) (fresh.Snapshot, error) {
	f.mu.Lock()
	f.read = append(f.read, scope)
	f.mu.Unlock()
	n := f.inflight.Add(1)
	defer f.inflight.Add(-1)
	for {
		m := f.maxIn.Load()
		if n <= m || f.maxIn.CompareAndSwap(m, n) {
			break
		}
	}
	v := f.server.Load() // read when the round trip reaches the server
	if f.release != nil {
		select {
		case <-f.release:
		case <-ctx.Done():
			return fresh.Snapshot{}, ctx.Err()
		}
	}
	if f.fail != nil {
		return fresh.Snapshot{}, f.fail
	}
	return fresh.Snapshot{ResourceVersion: strconv.FormatInt(v, 10)}, nil
}

func (f *fakeSource) Caught(s fresh.Snapshot) (bool, error) {
	want, _ := strconv.ParseInt(s.ResourceVersion, 10, 64)
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cache >= want, nil
}

func (f *fakeSource) Changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.change
}

// heldAtOne is a source whose server and cache are at version 1, and whose
// round trips are held until released.
func heldAtOne() *fakeSource {
	src := newFake()
	src.server.Store(1)
	src.catchUp(1)
	src.release = make(chan struct{})
	return src
}

// catchUp makes the cache hold version v.
func (f *fakeSource) catchUp(v int64) {
	f.mu.Lock()
	f.cache = v
	close(f.change)
	f.change = make(chan struct{})
	f.mu.Unlock()
}

func TestConcurrentWaitersShareOneRoundTripInFlight(t *testing.T) {
	src := newFake()
	src.server.Store(1)
	src.release = make(chan struct{})
	b := fresh.NewBarrier("Exemption", src)
	const waiters = 50
	errs := make(chan error, waiters)
	for range waiters {
		go func() { errs <- b.Wait(t.Context(), fresh.Scope{}) }()
	}
	// Every waiter joins while the first round trip flies (200ms gives the
	// goroutines time to start); then round trips are released until every
	// waiter is served, the cache current all along.
	time.Sleep(200 * time.Millisecond)
	src.catchUp(1)
	releaseAll(t, src, errs, waiters)
	// The first waiter starts a round trip; those that join while it flies
	// share the next one.
	if r := b.Rounds(); r > 2 {
		t.Errorf("rounds = %d for %d concurrent waiters, want at most 2", r, waiters)
	}
	if m := src.maxIn.Load(); m != 1 {
		t.Errorf("round trips in flight at once = %d, want 1", m)
	}
}

func TestARoundTripInFlightIsNotFreshForALaterWaiter(t *testing.T) {
	src := newFake()
	src.server.Store(1)
	src.release = make(chan struct{})
	b := fresh.NewBarrier("Exemption", src)
	first := make(chan error, 1)
	go func() { first <- b.Wait(t.Context(), fresh.Scope{}) }()
	// Wait until the first round trip has read the server's version 1.
	for src.inflight.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	// Then the server moves on, and a second request comes.
	src.server.Store(2)
	second := make(chan error, 1)
	go func() { second <- b.Wait(t.Context(), fresh.Scope{}) }()
	time.Sleep(20 * time.Millisecond) // lets the second waiter join
	src.release <- struct{}{}         // the first round trip lands with version 1
	src.catchUp(1)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	src.release <- struct{}{} // the second round trip, with version 2
	select {
	case err := <-second:
		t.Fatalf("the second waiter returned (%v) while the cache held version 1 and the server 2", err)
	case <-time.After(200 * time.Millisecond):
	}
	src.catchUp(2)
	select {
	case err := <-second:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the second waiter did not return once the cache reached version 2")
	}
	if r := b.Rounds(); r != 2 {
		t.Errorf("rounds = %d, want 2", r)
	}
}

func TestWaitEndsWithAnErrorWhenItCannotComplete(t *testing.T) {
	t.Run("the cache never catches up", func(t *testing.T) {
		src := newFake()
		src.server.Store(5)
		b := fresh.NewBarrier("Exemption", src)
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		err := b.Wait(ctx, fresh.Scope{})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Wait = %v, want the deadline", err)
		}
	})
	t.Run("the consistent read fails", func(t *testing.T) {
		src := newFake()
		src.fail = errors.New("connection refused")
		b := fresh.NewBarrier("Exemption", src)
		err := b.Wait(t.Context(), fresh.Scope{})
		if err == nil || !errors.Is(err, src.fail) {
			t.Fatalf("Wait = %v, want the read's error", err)
		}
	})
	t.Run("the consistent read hangs", func(t *testing.T) {
		src := newFake()
		src.release = make(chan struct{}) // never released
		b := fresh.NewBarrier("Exemption", src)
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		began := time.Now()
		if err := b.Wait(ctx, fresh.Scope{}); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Wait = %v, want the deadline", err)
		}
		if d := time.Since(began); d > 2*time.Second {
			t.Fatalf("Wait returned after %s, want about its 100ms deadline", d)
		}
	})
}

func TestReadsRecordEachBarrierOnce(t *testing.T) {
	a, b := fresh.NewBarrier("A", newFake()), fresh.NewBarrier("B", newFake())
	r := &fresh.Reads{}
	r.Note(a, fresh.Scope{}, false)
	r.Note(a, fresh.Scope{}, false)
	r.Note(nil, fresh.Scope{}, false)
	if r.Found() || !r.Read() || len(r.All()) != 1 {
		t.Fatalf("after misses: found %v read %v reads %d, want false true 1", r.Found(), r.Read(), len(r.All()))
	}
	r.Note(b, fresh.Scope{}, true)
	if !r.Found() || len(r.All()) != 2 {
		t.Fatalf("after a hit: found %v reads %d, want true 2", r.Found(), len(r.All()))
	}
	var none *fresh.Reads
	none.Note(a, fresh.Scope{}, true) // outside an admission binding: nothing recorded, no panic
}

// Each scope read is recorded once; the whole type covers every scope of
// it; and a binding that read more scopes of a type than are worth a round
// trip each is caught up on the whole type.
func TestReadsRecordEachScopeOnce(t *testing.T) {
	a, b := fresh.NewBarrier("A", newFake()), fresh.NewBarrier("B", newFake())
	key := fresh.KeyScope("apps", "web")
	r := &fresh.Reads{}
	r.Note(a, key, false)
	r.Note(a, key, true)
	r.Note(a, fresh.Scope{Namespace: "apps"}, false)
	r.Note(b, key, false)
	want := []fresh.Read{{Barrier: a, Scope: key}, {Barrier: a, Scope: fresh.Scope{Namespace: "apps"}}, {Barrier: b, Scope: key}}
	if !slices.Equal(r.All(), want) {
		t.Fatalf("reads %+v, want %+v", r.All(), want)
	}
	r.Note(a, fresh.Scope{}, false)
	r.Note(a, key, false)
	want = []fresh.Read{{Barrier: b, Scope: key}, {Barrier: a}}
	if !slices.Equal(r.All(), want) {
		t.Fatalf("after a read of the whole type: reads %+v, want %+v", r.All(), want)
	}
	many := &fresh.Reads{}
	for i := range 20 {
		many.Note(a, fresh.KeyScope("apps", strconv.Itoa(i)), false)
	}
	if got := many.All(); len(got) != 1 || !got[0].Scope.Whole() {
		t.Fatalf("20 keys read: reads %+v, want the whole type once", got)
	}
}

// A round trip serves the scope it read: a waiter on another scope of the
// same type does not queue behind it but starts its own at once, and each
// scope reaches the source as asked.
func TestRoundTripsAreSharedWithinAScope(t *testing.T) {
	src := heldAtOne()
	b := fresh.NewBarrier("Exemption", src)
	scopes := []fresh.Scope{fresh.KeyScope("a", "x"), {Namespace: "b"}, {}}
	errs := make(chan error, len(scopes))
	for i, s := range scopes {
		go func() { errs <- b.Wait(t.Context(), s) }()
		deadline := time.Now().Add(5 * time.Second)
		for src.inflight.Load() != int64(i+1) {
			if time.Now().After(deadline) {
				t.Fatalf("round trips in flight = %d with %d scopes waited on, want one each", src.inflight.Load(), i+1)
			}
			time.Sleep(time.Millisecond)
		}
	}
	for range scopes {
		src.release <- struct{}{}
	}
	for range scopes {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	got := src.scopes()
	slices.SortFunc(got, func(x, y fresh.Scope) int { return strings.Compare(x.Namespace+"/"+x.Name, y.Namespace+"/"+y.Name) })
	if want := []fresh.Scope{{}, fresh.KeyScope("a", "x"), {Namespace: "b"}}; !slices.Equal(got, want) {
		t.Fatalf("scopes read %+v, want each as asked: %+v", got, want)
	}
}

// However many scopes are waited on at once, only so many of their round
// trips fly: a waiter on another scope beyond them shares the whole type's
// round trip, which covers every scope, so a flood of rechecks, each of
// another object, costs the API server a bounded number of round trips at
// once.
func TestScopedRoundTripsInFlightAreBounded(t *testing.T) {
	src := heldAtOne()
	b := fresh.NewBarrier("Pod", src)
	const waiters = 12
	errs := make(chan error, waiters)
	for i := range waiters {
		go func() { errs <- b.Wait(t.Context(), fresh.KeyScope("apps", strconv.Itoa(i))) }()
	}
	// 4 scoped round trips and the whole type's fly; the other waiters
	// share the whole type's next one.
	time.Sleep(200 * time.Millisecond)
	if n := src.inflight.Load(); n != 5 {
		t.Fatalf("round trips in flight = %d for %d waiters on as many objects, want 5 (4 scoped and the whole type's)", n, waiters)
	}
	releaseAll(t, src, errs, waiters)
	whole := 0
	for _, s := range src.scopes() {
		if s.Whole() {
			whole++
		}
	}
	if r := b.Rounds(); r > 6 || whole == 0 {
		t.Errorf("%d round trips (%d of the whole type) for %d waiters; want at most 6: 4 scoped, the whole type's and its next", r, whole, waiters)
	}
}

// releaseAll releases src's round trips until waiters waiters have
// returned on errs, failing t on an error or after 10 seconds.
func releaseAll(t *testing.T, src *fakeSource, errs <-chan error, waiters int) {
	t.Helper()
	done := 0
	deadline := time.After(10 * time.Second)
	for done < waiters {
		select {
		case src.release <- struct{}{}:
		case err := <-errs:
			if err != nil {
				t.Fatal(err)
			}
			done++
		case <-deadline:
			t.Fatalf("%d of %d waiters returned within 10s", done, waiters)
		}
	}
}
