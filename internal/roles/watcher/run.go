package watcher

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	"golang.org/x/time/rate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/vigilkit/vigil/internal/definition/spec"
)

// addBinding adds a binding's controller (Reconcile, Finalize) or event
// handler (Watch, Ordered) to the manager; all run on the active replica
// only.
func addBinding(mgr manager.Manager, b *spec.Watch, o runOptions, m *metrics) error {
	switch b.Role {
	case spec.RoleWatch:
		return mgr.Add(&watchRunner{b: b, cache: mgr.GetCache(), o: o, metrics: m})
	case spec.RoleOrdered:
		return mgr.Add(&orderedRunner{b: b, cache: mgr.GetCache(), o: o, metrics: m, queues: newQueues(), global: o.global})
	}
	r := &reconciler{b: b, reader: mgr.GetCache(), writer: mgr.GetClient(), o: o, metrics: m, spacing: newSpacing(o.ReconcileSpacing)}
	c, err := controller.New(controllerName(o.Module, b), mgr, controller.Options{
		Reconciler:         r,
		SkipNameValidation: ptr.To(true),
		RecoverPanic:       ptr.To(false), // recovered by the reconciler, naming the object
		RateLimiter:        retryLimiter(b.RetryBackoff()),
		Logger:             o.Log.WithValues("binding", b.ID()),
	})
	if err != nil {
		return err
	}
	return c.Watch(source.Kind(mgr.GetCache(), b.New(), r.spacing.handler(), r.predicate()))
}

// retryLimiter delays an object's retries by the binding's back-off and,
// as controller-runtime's default does, all of the binding's retries together
// to 10 a second after a burst of 100.
func retryLimiter(b spec.Backoff) workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](b.Initial, b.Max),
		&workqueue.TypedBucketRateLimiter[reconcile.Request]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
}

// controllerName names a binding's controller, its queue and their metrics.
func controllerName(module string, b *spec.Watch) string {
	return module + "." + b.Capability + "." + b.Name
}

// reconciler runs a Reconcile or Finalize binding for one queued object.
type reconciler struct {
	b       *spec.Watch
	reader  client.Reader
	writer  client.Client
	o       runOptions
	metrics *metrics
	spacing *spacing
}

func (r *reconciler) predicate() predicate.Predicate {
	b := r.b
	if b.Role == spec.RoleFinalize {
		// Every change may matter: a new object needs the finalizer, a
		// deletion needs the handler, and an object the binding no longer
		// selects that still carries it needs it gone.
		return predicate.NewPredicateFuncs(func(o client.Object) bool {
			return matches(b, o) || controllerutil.ContainsFinalizer(o, b.Finalizer)
		})
	}
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool { return wants(b, spec.Added) && matches(b, e.Object) },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return wants(b, spec.Modified) && matches(b, e.ObjectNew) && !ownFinalizers(r.o.Module, e.ObjectOld, e.ObjectNew)
		},
		DeleteFunc:  func(e event.DeleteEvent) bool { return wants(b, spec.Deleted) && matches(b, e.Object) },
		GenericFunc: func(e event.GenericEvent) bool { return matches(b, e.Object) },
	}
}

func (r *reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	r.spacing.started(req.NamespacedName)
	obj := r.b.New()
	if err := r.reader.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil // gone: nothing left to reconcile
		}
		return reconcile.Result{}, err
	}
	if r.b.Role == spec.RoleFinalize {
		if !matches(r.b, obj) {
			return reconcile.Result{}, r.release(ctx, obj)
		}
		return r.finalize(ctx, obj)
	}
	if !matches(r.b, obj) {
		return reconcile.Result{}, nil
	}
	return r.result(r.call(ctx, obj))
}

// finalize keeps the binding's finalizer on a live object, and on a deleted
// one runs the handler and then removes it.
func (r *reconciler) finalize(ctx context.Context, obj client.Object) (reconcile.Result, error) {
	f := r.b.Finalizer
	if obj.GetDeletionTimestamp().IsZero() {
		if controllerutil.ContainsFinalizer(obj, f) {
			return reconcile.Result{}, nil
		}
		orig := obj.DeepCopyObject().(client.Object)
		controllerutil.AddFinalizer(obj, f)
		return reconcile.Result{}, r.writer.Patch(ctx, obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
	}
	if !controllerutil.ContainsFinalizer(obj, f) {
		return reconcile.Result{}, nil
	}
	// The handler gets a copy: obj is patched after it, from what it was.
	if res, err := r.result(r.call(ctx, obj.DeepCopyObject().(client.Object))); err != nil || res.RequeueAfter > 0 {
		return res, err
	}
	orig := obj.DeepCopyObject().(client.Object)
	controllerutil.RemoveFinalizer(obj, f)
	err := r.writer.Patch(ctx, obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
	if apierrors.IsNotFound(err) {
		return reconcile.Result{}, nil
	}
	return reconcile.Result{}, err
}

// release removes the binding's finalizer from an object the binding does
// not select (any more): one whose labels changed since, or one its
// admission policy over-selected (a name generated after admission). The
// handler is not called: the object is not the binding's.
func (r *reconciler) release(ctx context.Context, obj client.Object) error {
	if !controllerutil.ContainsFinalizer(obj, r.b.Finalizer) {
		return nil
	}
	orig := obj.DeepCopyObject().(client.Object)
	controllerutil.RemoveFinalizer(obj, r.b.Finalizer)
	err := r.writer.Patch(ctx, obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// call runs the handler on obj, turning a panic into an error that is
// retried. obj is the handler's to keep or change: the cache's Get made it
// (a copy of what the cache holds), and a caller that reads it afterwards
// passes a copy of its own.
func (r *reconciler) call(ctx context.Context, obj client.Object) (err error) {
	ctx = handlerContext(ctx, r.o, r.b, obj)
	ns, name := obj.GetNamespace(), obj.GetName() // as read: the handler may change obj
	defer func() {
		if p := recover(); p != nil {
			r.metrics.panics.WithLabelValues(r.o.Module, r.b.ID()).Inc()
			r.o.Log.Error(fmt.Errorf("%v", p), "handler panicked; retrying like an error", "binding", r.b.ID(), "site", r.b.Site,
				"kind", r.b.GVK.Kind, "namespace", ns, "name", name, "stack", string(debug.Stack()))
			err = fmt.Errorf("binding %s panicked on %s %s/%s: %v", r.b.ID(), r.b.GVK.Kind, ns, name, p)
		}
	}()
	return r.b.Reconcile(ctx, obj)
}

// result maps a handler's error to the queue's: a requeue request comes back
// after its delay, other errors with back-off (terminal ones not at all).
func (r *reconciler) result(err error) (reconcile.Result, error) {
	if d, ok := RequeueAfter(err); ok {
		return reconcile.Result{RequeueAfter: d}, nil
	}
	return reconcile.Result{}, err
}

// watchRunner feeds a Watch binding every event of its type's informer, in
// order, while its replica is active.
type watchRunner struct {
	b       *spec.Watch
	cache   cache.Cache
	o       runOptions
	metrics *metrics
}

func (w *watchRunner) Start(ctx context.Context) error {
	inf, err := w.cache.GetInformer(ctx, w.b.New())
	if err != nil {
		return err
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { w.deliver(ctx, obj, spec.Added) },
		UpdateFunc: func(old, obj any) {
			if !ownFinalizers(w.o.Module, old, obj) { // the module's own Finalize bindings' doing
				w.deliver(ctx, obj, spec.Modified)
			}
		},
		DeleteFunc: func(obj any) { w.deliver(ctx, obj, spec.Deleted) },
	})
	if err != nil {
		return err
	}
	<-ctx.Done()
	return inf.RemoveEventHandler(reg)
}

func (w *watchRunner) deliver(ctx context.Context, o any, ev spec.Event) {
	if tomb, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = tomb.Obj
	}
	obj, ok := o.(client.Object)
	if !ok || ctx.Err() != nil || !wants(w.b, ev) || !matches(w.b, obj) {
		return
	}
	w.metrics.events.WithLabelValues(w.o.Module, w.b.ID(), string(ev)).Inc()
	hctx := handlerContext(ctx, w.o, w.b, obj)
	// A panic is retried with back-off, holding up the events behind it so
	// that they still arrive in order; after the last attempt the event is
	// dropped.
	delay := watchRetryBase
	for attempt := 1; ; attempt++ {
		p := w.call(hctx, obj, ev)
		if p == nil {
			return
		}
		w.metrics.panics.WithLabelValues(w.o.Module, w.b.ID()).Inc()
		last := attempt == watchAttempts || ctx.Err() != nil
		msg := "watch handler panicked; retrying the event"
		if last {
			msg = "watch handler panicked on every attempt; the event is dropped and the next ones are delivered"
		}
		w.o.Log.Error(fmt.Errorf("%v", p.value), msg, "binding", w.b.ID(), "site", w.b.Site, "event", ev, "attempt", attempt,
			"kind", w.b.GVK.Kind, "namespace", obj.GetNamespace(), "name", obj.GetName(), "stack", p.stack)
		if last {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay *= 4
	}
}

// How often, and from what delay, a panicking Watch handler is tried.
const (
	watchAttempts  = 4
	watchRetryBase = 50 * time.Millisecond
)

type panicked struct {
	value any
	stack string
}

// call runs the Watch handler once on a copy of obj, turning a panic into a
// value.
func (w *watchRunner) call(ctx context.Context, obj client.Object, ev spec.Event) (p *panicked) {
	defer func() {
		if v := recover(); v != nil {
			p = &panicked{value: v, stack: string(debug.Stack())}
		}
	}()
	w.b.OnEvent(ctx, obj.DeepCopyObject().(client.Object), ev)
	return nil
}
