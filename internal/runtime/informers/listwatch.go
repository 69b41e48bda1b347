package informers

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/vigilkit/vigil/internal/runtime/rolebind"
	"github.com/vigilkit/vigil/internal/runtime/watchhealth"
)

// newInformer is client-go's shared informer over a list-watch that counts
// the watches the API server ends with 410 Gone (their resourceVersion was
// compacted away), after which the informer relists: the one event that
// shows a watcher may have missed deltas and rebuilt its view. A list-watch
// refused in a namespace the role's rights are bound in by binder (when not
// nil) waits for the namespace (see rolebind.ListWatch). The role's
// health tracker follows it (when not nil): what it hears, and its watch
// ended and watched again when silent past the stale bound. The transform
// the cache sets runs behind Reuse over the informer's own store, so that
// a relist holds again only what changed.
func NewInformer(module string, health *watchhealth.Tracker, scheme *runtime.Scheme, binder *rolebind.Binder) func(toolscache.ListerWatcher, runtime.Object, time.Duration, toolscache.Indexers) toolscache.SharedIndexInformer {
	return func(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
		m := registerMetrics()
		expired := func() { m.watchErrors.WithLabelValues(module, "expired").Inc() }
		gvk := obj.GetObjectKind().GroupVersionKind()
		if g, err := apiutil.GVKForObject(obj, scheme); err == nil {
			gvk = g
		}
		tracked := health.Informer(gvk.Kind, "").Wrap(rolebind.ListWatch(lw, binder, obj, gvk, scheme))
		return reusing{toolscache.NewSharedIndexInformer(&countingLW{lw: tracked, ctx: toolscache.ToListerWatcherWithContext(tracked), expired: expired}, obj, resync, indexers)}
	}
}

type countingLW struct {
	lw      toolscache.ListerWatcher
	ctx     toolscache.ListerWatcherWithContext
	expired func()
}

// List is the deprecated form of ListWithContext.
func (c *countingLW) List(opts metav1.ListOptions) (runtime.Object, error) {
	return c.ctx.ListWithContext(context.Background(), opts)
}

func (c *countingLW) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	return c.ctx.ListWithContext(ctx, opts)
}

// Watch is the deprecated form of WatchWithContext.
func (c *countingLW) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return c.count(c.ctx.WatchWithContext(context.Background(), opts))
}

func (c *countingLW) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return c.count(c.ctx.WatchWithContext(ctx, opts))
}

// IsWatchListSemanticsUnSupported passes on what the wrapped list-watch says
// of streaming lists.
func (c *countingLW) IsWatchListSemanticsUnSupported() bool {
	u, ok := c.lw.(interface{ IsWatchListSemanticsUnSupported() bool })
	return ok && u.IsWatchListSemanticsUnSupported()
}

func (c *countingLW) count(w watch.Interface, err error) (watch.Interface, error) {
	if err != nil {
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			c.expired()
		}
		return nil, err
	}
	return watch.Filter(w, func(ev watch.Event) (watch.Event, bool) {
		if ev.Type == watch.Error {
			if st, ok := ev.Object.(*metav1.Status); ok && st.Code == 410 {
				c.expired()
			}
		}
		return ev, true
	}), nil
}
