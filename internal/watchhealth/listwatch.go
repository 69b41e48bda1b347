package watchhealth

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

// Wrap returns lw with the informer's record kept: what it hears, its
// relists and reconnects, its watches renewed every Renew and ended when
// silent past the stale bound, so that the reflector watches again. A nil Informer returns lw as it is.
// What it returns has client-go's methods with and without a context.
func (i *Informer) Wrap(lw toolscache.ListerWatcher) toolscache.ListerWatcher {
	if i == nil {
		return lw
	}
	return &listWatch{inf: i, lw: lw, ctx: toolscache.ToListerWatcherWithContext(lw)}
}

type listWatch struct {
	inf *Informer
	lw  toolscache.ListerWatcher
	ctx toolscache.ListerWatcherWithContext
}

// List is the deprecated form of ListWithContext.
func (l *listWatch) List(opts metav1.ListOptions) (runtime.Object, error) {
	return l.ListWithContext(context.Background(), opts)
}

// Watch is the deprecated form of WatchWithContext.
func (l *listWatch) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return l.WatchWithContext(context.Background(), opts)
}

// IsWatchListSemanticsUnSupported passes on what the wrapped list-watch says
// of streaming lists.
func (l *listWatch) IsWatchListSemanticsUnSupported() bool {
	u, ok := l.lw.(interface{ IsWatchListSemanticsUnSupported() bool })
	return ok && u.IsWatchListSemanticsUnSupported()
}

// ListWithContext lists one page. A list with no answer within the stale
// bound is abandoned and tried again at once over new connections, as often
// as it takes: the reflector sees no failure, so it does not back off, and
// the list in flight when the network returns completes then.
func (l *listWatch) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	if opts.Continue == "" {
		l.inf.lists.Add(1)
	}
	for {
		attempt, cancel, abandoned := l.attempt(ctx, "a list")
		obj, err := l.ctx.ListWithContext(attempt, opts)
		gaveUp := abandoned()
		cancel()
		if err != nil && gaveUp && ctx.Err() == nil {
			continue
		}
		if err == nil {
			l.inf.hear()
		}
		return obj, err
	}
}

// attempt is the context of one request of the informer, cancelled when it
// has no answer within the stale bound (marking the informer stalled);
// abandoned disarms that and reports whether it happened.
func (l *listWatch) attempt(ctx context.Context, what string) (context.Context, context.CancelFunc, func() bool) {
	ctx, cancel := context.WithCancel(withInformer(ctx, l.inf))
	var gaveUp atomic.Bool
	t := time.AfterFunc(l.inf.t.staleAfter, func() {
		gaveUp.Store(true)
		l.inf.stalled(what)
		cancel()
	})
	return ctx, cancel, func() bool {
		t.Stop()
		return gaveUp.Load()
	}
}

// WatchWithContext opens a watch the server ends after Renew, tried again
// when it is not established within the stale bound (as a list is), and
// ended with 410 Gone once it has been silent that long.
func (l *listWatch) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	if opts.SendInitialEvents != nil && *opts.SendInitialEvents {
		l.inf.lists.Add(1) // a streaming list
	} else if l.inf.watched.Load() && l.inf.dropped.Load() {
		l.inf.reconnects.Add(1)
	}
	renew := l.inf.t.Renew()
	secs := int64(renew / time.Second)
	opts.TimeoutSeconds = &secs
	for {
		attempt, cancel, abandoned := l.attempt(ctx, "a watch to start")
		w, err := l.ctx.WatchWithContext(attempt, opts)
		gaveUp := abandoned()
		if err == nil && gaveUp {
			w.Stop() // established just as it was given up: its context is gone
			err = context.Canceled
		}
		if err != nil {
			cancel()
			if gaveUp && ctx.Err() == nil {
				continue
			}
			return nil, err
		}
		l.inf.hear()
		l.inf.watched.Store(true)
		l.inf.dropped.Store(false)
		m := &monitored{inf: l.inf, in: w, cancel: cancel, out: make(chan watch.Event), stop: make(chan struct{}), started: time.Now(), renew: renew}
		go m.run()
		return m, nil
	}
}

// monitored passes a watch's events on, hearing each, and ends the watch
// when it has been silent past the stale bound.
type monitored struct {
	inf      *Informer
	in       watch.Interface
	cancel   context.CancelFunc
	out      chan watch.Event
	stop     chan struct{}
	stopOnce sync.Once
	started  time.Time
	renew    time.Duration
}

func (m *monitored) ResultChan() <-chan watch.Event { return m.out }

func (m *monitored) Stop() {
	m.stopOnce.Do(func() { close(m.stop) })
}

func (m *monitored) run() {
	defer close(m.out)
	defer m.cancel()
	defer m.in.Stop()
	silence := time.NewTimer(m.inf.t.staleAfter)
	defer silence.Stop()
	for {
		select {
		case <-m.stop:
			return
		case ev, ok := <-m.in.ResultChan():
			if !ok {
				// Ended by the server's timeout, or earlier: dropped.
				if time.Since(m.started) < m.renew-500*time.Millisecond {
					m.inf.dropped.Store(true)
				}
				return
			}
			m.inf.hear()
			select {
			case m.out <- ev:
			case <-m.stop:
				return
			}
			silence.Reset(m.inf.t.staleAfter)
		case <-silence.C:
			// Closed without an error: the reflector watches again at once
			// from the last resourceVersion it saw, and the API server
			// replays every change since, or answers 410 Gone when its
			// history no longer reaches back that far, and the reflector
			// lists. Ending it with an error would make the reflector list
			// after a back-off that grows with each silence.
			m.inf.stalled("watch events")
			m.inf.dropped.Store(true)
			return
		}
	}
}
