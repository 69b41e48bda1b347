package watcher

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// DefaultSpacing is the least time between the starts of two reconciles of
// one object.
const DefaultSpacing = 200 * time.Millisecond

// spacing enqueues objects for reconcile at most once per interval each: a
// change to an object not reconciled lately is queued at once; changes that
// come faster wait out the rest of the interval, and the queue folds them into
// one run that reads the object as it is then. A burst of updates to one
// object thus costs a handful of runs, not one per update.
type spacing struct {
	every time.Duration

	mu   sync.Mutex
	last map[types.NamespacedName]time.Time
}

func newSpacing(every time.Duration) *spacing {
	if every <= 0 {
		every = DefaultSpacing
	}
	return &spacing{every: every, last: map[types.NamespacedName]time.Time{}}
}

// started records that a reconcile of key starts now.
func (s *spacing) started(key types.NamespacedName) {
	s.mu.Lock()
	s.last[key] = time.Now()
	s.mu.Unlock()
}

func (s *spacing) enqueue(obj client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request], forget bool) {
	key := types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}
	s.mu.Lock()
	last, seen := s.last[key]
	if forget {
		delete(s.last, key)
	}
	s.mu.Unlock()
	req := reconcile.Request{NamespacedName: key}
	if wait := s.every - time.Since(last); seen && wait > 0 {
		q.AddAfter(req, wait)
		return
	}
	q.Add(req)
}

func (s *spacing) handler() handler.EventHandler {
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			s.enqueue(e.Object, q, false)
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			s.enqueue(e.ObjectNew, q, false)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			s.enqueue(e.Object, q, true)
		},
		GenericFunc: func(_ context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			s.enqueue(e.Object, q, false)
		},
	}
}
