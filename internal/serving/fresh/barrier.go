package fresh

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Snapshot is the state of one scope of a type on the API server at a
// resourceVersion: each object's key (namespace/name, or name) and
// resourceVersion.
type Snapshot struct {
	ResourceVersion string
	Items           map[string]string
	// Scope is what the read covered: the cache has caught up when it holds
	// every item listed, and nothing else of this scope older than the read.
	Scope Scope
	// Namespaces, for a cache limited to some namespaces, holds the
	// resourceVersion each namespace's list was read at.
	Namespaces map[string]string
}

// Source is what a Barrier catches up: the API server's view of one type and
// the cache's.
type Source interface {
	// Latest reads the current state of one scope of the type from the API
	// server, at least as fresh as etcd when it is called.
	Latest(ctx context.Context, scope Scope) (Snapshot, error)
	// Caught reports whether the cache holds s's state or newer, in s's
	// scope.
	Caught(s Snapshot) (bool, error)
	// Changed returns a channel that is closed at the cache's next change.
	Changed() <-chan struct{}
}

// Barrier catches one lister type's cache up with the API server, sharing
// round trips among concurrent waiters: see the package's doc.
type Barrier struct {
	name string
	src  Source
	// roundTimeout bounds one round trip, which no single waiter owns.
	roundTimeout time.Duration

	mu    sync.Mutex
	lanes map[Scope]*lane

	rounds atomic.Int64
}

// lane is the round trips of one scope: the one in flight, and the one its
// later waiters share, which starts when it lands.
type lane struct {
	inflight, next *round
}

// round is one round trip to the API server, shared by its waiters.
type round struct {
	done   chan struct{}
	snap   Snapshot
	err    error
	caught atomic.Bool
}

// NewBarrier returns a barrier for src; name says which type in errors. Its
// round trips give up after 30 seconds.
func NewBarrier(name string, src Source) *Barrier {
	return &Barrier{name: name, src: src, roundTimeout: 30 * time.Second, lanes: map[Scope]*lane{}}
}

// Name is the type the barrier catches up.
func (b *Barrier) Name() string { return b.name }

// Rounds is the number of round trips the barrier has started.
func (b *Barrier) Rounds() int64 { return b.rounds.Load() }

// pollEvery re-checks the cache even without a change notification: the
// store's resourceVersion also moves on watch bookmarks, which notify nothing.
const pollEvery = 50 * time.Millisecond

// Wait returns once the cache holds the API server's state of scope as of a
// moment after Wait was called, or with an error when ctx ends first or the
// round trip failed.
func (b *Barrier) Wait(ctx context.Context, scope Scope) error {
	r := b.join(scope)
	select {
	case <-r.done:
	case <-ctx.Done():
		return fmt.Errorf("%s: the consistent read did not return in time: %w", b.name, context.Cause(ctx))
	}
	if r.err != nil {
		return fmt.Errorf("%s: the consistent read failed: %w", b.name, r.err)
	}
	timer := time.NewTimer(pollEvery)
	defer timer.Stop()
	for !r.caught.Load() {
		changed := b.src.Changed() // before the check, so no change is missed
		ok, err := b.src.Caught(r.snap)
		if err != nil {
			return fmt.Errorf("%s: %w", b.name, err)
		}
		if ok {
			r.caught.Store(true)
			break
		}
		timer.Reset(pollEvery)
		select {
		case <-changed:
		case <-timer.C:
		case <-ctx.Done():
			return fmt.Errorf("%s: the cache did not reach resourceVersion %s in time: %w", b.name, r.snap.ResourceVersion, context.Cause(ctx))
		}
	}
	return nil
}

// maxScopedLanes bounds the scopes of one type whose round trips fly at
// once. A waiter on another scope beyond it waits on the whole type's round
// trip instead, which covers every scope and is shared by all such waiters:
// a flood of rechecks, each of another object, costs the API server at most
// maxScopedLanes small round trips and the whole type's at once, however
// many requests wait.
const maxScopedLanes = 4

// join returns the round trip of scope the caller may rely on: the one in
// flight is not, as it may have read the API server before the caller came.
func (b *Barrier) join(scope Scope) *round {
	b.mu.Lock()
	defer b.mu.Unlock()
	l := b.lanes[scope]
	if l == nil && !scope.Whole() {
		scoped := len(b.lanes)
		if _, ok := b.lanes[Scope{}]; ok {
			scoped--
		}
		if scoped >= maxScopedLanes {
			scope = Scope{}
			l = b.lanes[scope]
		}
	}
	if l == nil {
		l = &lane{inflight: &round{done: make(chan struct{})}}
		b.lanes[scope] = l
		go b.fly(scope, l, l.inflight)
		return l.inflight
	}
	if l.next == nil {
		l.next = &round{done: make(chan struct{})}
	}
	return l.next
}

// fly runs a round trip of scope, then starts the one that waited for it, if
// any; a lane with none is forgotten.
func (b *Barrier) fly(scope Scope, l *lane, r *round) {
	b.rounds.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), b.roundTimeout)
	r.snap, r.err = b.src.Latest(ctx, scope)
	cancel()
	close(r.done)
	b.mu.Lock()
	defer b.mu.Unlock()
	l.inflight, l.next = l.next, nil
	if l.inflight == nil {
		delete(b.lanes, scope)
		return
	}
	go b.fly(scope, l, l.inflight)
}

// WaitAll waits for every read's barrier on its scope, concurrently, and
// returns the first error.
func WaitAll(ctx context.Context, reads []Read) error {
	if len(reads) == 1 {
		return reads[0].Barrier.Wait(ctx, reads[0].Scope)
	}
	errs := make([]error, len(reads))
	var wg sync.WaitGroup
	for i, r := range reads {
		wg.Go(func() { errs[i] = r.Barrier.Wait(ctx, r.Scope) })
	}
	wg.Wait()
	return errors.Join(errs...)
}
