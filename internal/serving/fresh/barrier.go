package fresh

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Snapshot is the state of one type on the API server at a resourceVersion:
// each object's key (namespace/name, or name) and resourceVersion.
type Snapshot struct {
	ResourceVersion string
	Items           map[string]string
	// Namespaces, for a cache limited to some namespaces, holds the
	// resourceVersion each namespace's list was read at.
	Namespaces map[string]string
}

// Source is what a Barrier catches up: the API server's view of one type and
// the cache's.
type Source interface {
	// Latest reads the type's current state from the API server, at least as
	// fresh as etcd when it is called.
	Latest(ctx context.Context) (Snapshot, error)
	// Caught reports whether the cache holds s's state or newer.
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

	mu       sync.Mutex
	inflight *round
	next     *round

	rounds atomic.Int64
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
	return &Barrier{name: name, src: src, roundTimeout: 30 * time.Second}
}

// Name is the type the barrier catches up.
func (b *Barrier) Name() string { return b.name }

// Rounds is the number of round trips the barrier has started.
func (b *Barrier) Rounds() int64 { return b.rounds.Load() }

// pollEvery re-checks the cache even without a change notification: the
// store's resourceVersion also moves on watch bookmarks, which notify nothing.
const pollEvery = 50 * time.Millisecond

// Wait returns once the cache holds the API server's state as of a moment
// after Wait was called, or with an error when ctx ends first or the round
// trip failed.
func (b *Barrier) Wait(ctx context.Context) error {
	r := b.join()
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

// join returns the round trip the caller may rely on: the one in flight is
// not, as it may have read the API server before the caller came.
func (b *Barrier) join() *round {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.inflight == nil {
		b.inflight = &round{done: make(chan struct{})}
		go b.fly(b.inflight)
		return b.inflight
	}
	if b.next == nil {
		b.next = &round{done: make(chan struct{})}
	}
	return b.next
}

// fly runs a round trip, then starts the one that waited for it, if any.
func (b *Barrier) fly(r *round) {
	b.rounds.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), b.roundTimeout)
	r.snap, r.err = b.src.Latest(ctx)
	cancel()
	close(r.done)
	b.mu.Lock()
	b.inflight, b.next = b.next, nil
	if b.inflight != nil {
		go b.fly(b.inflight)
	}
	b.mu.Unlock()
}

// WaitAll waits for every barrier, concurrently, and returns the first error.
func WaitAll(ctx context.Context, barriers []*Barrier) error {
	if len(barriers) == 1 {
		return barriers[0].Wait(ctx)
	}
	errs := make([]error, len(barriers))
	var wg sync.WaitGroup
	for i, b := range barriers {
		wg.Go(func() { errs[i] = b.Wait(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}
