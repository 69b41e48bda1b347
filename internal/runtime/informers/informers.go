package informers

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/runtime/podevents"
	"github.com/vigilkit/vigil/internal/runtime/rolebind"
	"github.com/vigilkit/vigil/internal/runtime/watchhealth"
	"github.com/vigilkit/vigil/internal/serving/warming"
)

// WarmUp starts the informers of every agreed type and waits for them to
// sync. A type the API server does not serve yet (its CRD is missing) is
// retried with back-off, saying so.
func WarmUp(ctx context.Context, c cache.Cache, agreed []spec.Agreed, log logr.Logger) error {
	var informers []cache.Informer
	for _, a := range agreed {
		backoff := wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: 1 << 30, Cap: 10 * time.Second}
		for {
			inf, err := c.GetInformer(ctx, a.New(), cache.BlockUntilSynced(false))
			if err == nil {
				informers = append(informers, inf)
				break
			}
			if !meta.IsNoMatchError(err) && !apierrors.IsNotFound(err) {
				log.Error(err, "starting an informer; retrying", "kind", a.GVK.String())
			} else {
				log.Info("waiting for the API server to serve the kind (is its CRD installed?)", "kind", a.GVK.String())
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(backoff.Step()):
			}
		}
	}
	return waitSynced(ctx, informers)
}

// waitSynced waits until every informer has synced, asking every few
// milliseconds: client-go's WaitForCacheSync asks every 100 ms, which would
// be most of the time a module takes to become ready.
func waitSynced(ctx context.Context, informers []cache.Informer) error {
	poll := time.Millisecond
	for {
		synced := true
		for _, inf := range informers {
			if !inf.HasSynced() {
				synced = false
				break
			}
		}
		if synced {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
		poll = min(2*poll, 10*time.Millisecond)
	}
}

// StartCache starts a shared cache of the users' types outside a manager
// (for the admission role's listers), once the API server serves their
// kinds (see Served), and hands it to started before it syncs. The status
// it returns is nil once every type has synced, and until then says what
// the cache waits for: a kind not served yet, the informers' first lists,
// or what failed. sink, when not nil, records the wait as Events. binder,
// when not nil, binds the role's rights in the listers' namespaces (rolebind).
func StartCache(ctx context.Context, cfg *rest.Config, module string, scheme *runtime.Scheme, users []spec.Lister, log logr.Logger, sink podevents.Sink, health *watchhealth.Tracker, binder *rolebind.Binder, started func(cache.Cache) error) (status func() error, err error) {
	agreed := spec.Agree(users)
	byObject, err := ByObject(agreed)
	if err != nil {
		return nil, err
	}
	served := NewServed(CustomKinds(agreed))
	var synced atomic.Bool
	var failed atomic.Pointer[error]
	fail := func(err error) {
		log.Error(err, "the listers' cache cannot start")
		failed.Store(&err)
	}
	go func() {
		if err := served.Await(ctx, cfg, log, sink); err != nil {
			if ctx.Err() == nil {
				fail(err)
			}
			return
		}
		// The listers are read first thing at start: no second lost to a
		// watch cache the API server is still building (see
		// internal/serving/warming).
		c, err := cache.New(warming.Wrap(rest.CopyConfig(cfg)), cache.Options{
			Scheme: scheme, ByObject: byObject, DefaultTransform: Transform(),
			DefaultWatchErrorHandler: WatchErrorHandler(module),
			NewInformer:              NewInformer(module, health, scheme, binder),
		})
		if err == nil {
			err = started(c)
		}
		if err != nil {
			fail(err)
			return
		}
		go func() {
			if err := c.Start(ctx); err != nil {
				log.Error(err, "listers' cache stopped")
			}
		}()
		if WarmUp(ctx, c, agreed, log) == nil {
			synced.Store(true)
		}
	}()
	return func() error {
		if p := failed.Load(); p != nil {
			return *p
		}
		if err := served.Err(); err != nil {
			return err
		}
		if !synced.Load() {
			return errors.New("the listers' informers have not synced yet")
		}
		return nil
	}, nil
}

// WatchErrorHandler counts the informers' watch errors by reason, then lets
// client-go log them and relist or resume as it does.
func WatchErrorHandler(module string) toolscache.WatchErrorHandlerWithContext {
	m := registerMetrics()
	return func(ctx context.Context, r *toolscache.Reflector, err error) {
		switch {
		case apierrors.IsResourceExpired(err) || apierrors.IsGone(err):
			// Counted where the watch ends (see newInformer): client-go
			// passes only some of them here.
		case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
			m.watchErrors.WithLabelValues(module, "closed").Inc()
		default:
			m.watchErrors.WithLabelValues(module, "other").Inc()
		}
		toolscache.DefaultWatchErrorHandler(ctx, r, err)
	}
}
