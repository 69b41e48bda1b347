package watcher

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/go-logr/logr"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/vigilkit/vigil/internal/definition/spec"
)

// orderedRunner runs an Ordered binding: every event of its informer goes
// to the queue its key names (spec.QueueBy), and each queue's events are
// handled one at a time, in the order they came, the queues in parallel.
type orderedRunner struct {
	b       *spec.Watch
	cache   cache.Cache
	o       runOptions
	metrics *metrics
	// queues are the binding's own; global those every QueueGlobal binding
	// of the module shares.
	queues, global *queues
}

func (r *orderedRunner) Start(ctx context.Context) error {
	inf, err := r.cache.GetInformer(ctx, r.b.New())
	if err != nil {
		return err
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { r.enqueue(ctx, obj, spec.Added) },
		UpdateFunc: func(old, obj any) {
			if sameVersion(old, obj) || ownFinalizers(r.o.Module, old, obj) {
				return // a resync, or the module's own finalizer: no change
			}
			r.enqueue(ctx, obj, spec.Modified)
		},
		DeleteFunc: func(obj any) { r.enqueue(ctx, obj, spec.Deleted) },
	})
	if err != nil {
		return err
	}
	<-ctx.Done()
	err = inf.RemoveEventHandler(reg)
	r.queues.wait()
	return err
}

// sameVersion reports an update that changes nothing: the informer's resync.
func sameVersion(old, obj any) bool {
	o, ok1 := old.(client.Object)
	n, ok2 := obj.(client.Object)
	return ok1 && ok2 && o.GetResourceVersion() == n.GetResourceVersion()
}

func (r *orderedRunner) enqueue(ctx context.Context, o any, ev spec.Event) {
	if tomb, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = tomb.Obj
	}
	obj, ok := o.(client.Object)
	if !ok || ctx.Err() != nil || !matches(r.b, obj) {
		return
	}
	r.metrics.events.WithLabelValues(r.o.Module, r.b.ID(), string(ev)).Inc()
	qs, key := r.queues, ""
	switch r.b.Queue {
	case spec.QueuePerObject:
		key = obj.GetNamespace() + "/" + obj.GetName()
	case spec.QueuePerNamespace:
		key = obj.GetNamespace()
	case spec.QueueGlobal:
		qs = r.global
	}
	obj = obj.DeepCopyObject().(client.Object)
	qs.add(key, func() { r.handle(ctx, obj, ev) })
}

// handle runs the handler on one event until it succeeds, returns a
// Terminal error, or ctx ends; the queue's later events wait meanwhile.
func (r *orderedRunner) handle(ctx context.Context, obj client.Object, ev spec.Event) {
	hctx := handlerContext(ctx, r.o, r.b, obj)
	log := logr.FromContextOrDiscard(hctx)
	backoff := r.b.RetryBackoff()
	delay := backoff.Initial
	for attempt := 1; ctx.Err() == nil; attempt++ {
		err := r.call(hctx, obj, ev)
		if err == nil {
			return
		}
		if errors.Is(err, reconcile.TerminalError(nil)) {
			log.Error(err, "ordered handler failed for good (Terminal); the event is dropped", "event", ev, "attempt", attempt)
			return
		}
		log.Error(err, "ordered handler failed; retrying the event while the queue's later events wait", "event", ev, "attempt", attempt, "retryIn", delay)
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, backoff.Max)
	}
}

// call runs the handler once, turning a panic into an error.
func (r *orderedRunner) call(ctx context.Context, obj client.Object, ev spec.Event) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("panic: %v\n%s", v, debug.Stack())
		}
	}()
	return r.b.Ordered(ctx, obj.DeepCopyObject().(client.Object), ev)
}

// queues are first-in first-out queues by key, each drained by a goroutine
// of its own while it holds work: one at a time within a key, keys in
// parallel, and no goroutine for a key with nothing queued.
type queues struct {
	mu      sync.Mutex
	pending map[string][]func()
	running sync.WaitGroup
}

func newQueues() *queues { return &queues{pending: map[string][]func(){}} }

// add queues fn under key, starting the key's drain when it has none.
func (q *queues) add(key string, fn func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	work, draining := q.pending[key]
	q.pending[key] = append(work, fn)
	if !draining {
		q.running.Add(1)
		go q.drain(key)
	}
}

func (q *queues) drain(key string) {
	defer q.running.Done()
	for {
		q.mu.Lock()
		work := q.pending[key]
		if len(work) == 0 {
			delete(q.pending, key)
			q.mu.Unlock()
			return
		}
		fn := work[0]
		work[0] = nil
		q.pending[key] = work[1:]
		q.mu.Unlock()
		fn()
	}
}

// wait waits until every queue is drained.
func (q *queues) wait() { q.running.Wait() }
