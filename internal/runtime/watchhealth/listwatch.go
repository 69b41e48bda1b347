package watchhealth

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
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
// A response still arriving (a long list, a byte at a time) is not given up.
func (l *listWatch) attempt(ctx context.Context, what string) (context.Context, context.CancelFunc, func() bool) {
	ctx, cancel := context.WithCancel(withInformer(ctx, l.inf))
	began := time.Now().UnixNano()
	var (
		mu             sync.Mutex
		t              *time.Timer
		gaveUp, disarm bool
	)
	check := func() {
		mu.Lock()
		defer mu.Unlock()
		if disarm {
			return
		}
		quiet := time.Since(time.Unix(0, max(began, l.inf.read.Load())))
		if left := l.inf.t.staleAfter - quiet; left > 0 {
			t.Reset(left)
			return
		}
		gaveUp = true
		l.inf.stalled(what)
		cancel()
	}
	mu.Lock()
	t = time.AfterFunc(l.inf.t.staleAfter, check)
	mu.Unlock()
	return ctx, cancel, func() bool {
		mu.Lock()
		defer mu.Unlock()
		disarm = true
		t.Stop()
		return gaveUp
	}
}

// WatchWithContext opens a watch the server ends after Renew, tried again
// when it is not established within the stale bound (as a list is). The
// watch it returns resumes itself: see resuming.
func (l *listWatch) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	streaming := opts.SendInitialEvents != nil && *opts.SendInitialEvents
	if streaming {
		// A streaming list keeps the reflector's timeout, long enough for
		// its initial events; once they are over, it is renewed as any.
		l.inf.lists.Add(1)
	} else {
		opts.TimeoutSeconds = l.inf.t.renewSeconds()
	}
	// Stop ends the watch and any attempt to open the next.
	ctx, end := context.WithCancel(ctx)
	w, cancel, err := l.open(ctx, opts)
	if err != nil {
		end()
		return nil, err
	}
	m := &resuming{l: l, ctx: ctx, end: end, opts: opts, in: w, cancel: cancel, out: make(chan watch.Event), stop: make(chan struct{}),
		started: time.Now(), rv: opts.ResourceVersion, streaming: streaming}
	go m.run()
	return m, nil
}

// open establishes one watch, trying again at once when it is not
// established within the stale bound; cancel ends it.
func (l *listWatch) open(ctx context.Context, opts metav1.ListOptions) (watch.Interface, context.CancelFunc, error) {
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
			return nil, nil, err
		}
		l.inf.hear()
		return w, cancel, nil
	}
}

// resuming passes a watch's events on, hearing each, and keeps it going: when
// the server ends it (every Renew), when its connection drops, and when it has
// been silent past the stale bound (the role's connections closed then), it
// watches again from the last resourceVersion it passed on, and the API
// server replays every change since. The reflector sees one watch: it does not
// back off, as it would after each end, with a delay that grows to a minute.
// An error (410 Gone when the server's history no longer reaches back that
// far) is passed on, and the reflector lists. A streaming list is not resumed
// before its initial events are over: it ends, and the reflector decides;
// after them it goes on as a watch renewed every Renew.
type resuming struct {
	l         *listWatch
	ctx       context.Context
	end       context.CancelFunc
	opts      metav1.ListOptions
	in        watch.Interface
	cancel    context.CancelFunc
	out       chan watch.Event
	stop      chan struct{}
	stopOnce  sync.Once
	started   time.Time
	rv        string
	streaming bool
}

func (m *resuming) ResultChan() <-chan watch.Event { return m.out }

func (m *resuming) Stop() {
	m.stopOnce.Do(func() {
		close(m.stop)
		m.end()
	})
}

// resumable reports whether the watch can start again where it was.
func (m *resuming) resumable() bool { return !m.streaming && m.rv != "" && m.rv != "0" }

func (m *resuming) run() {
	defer close(m.out)
	defer func() { m.in.Stop(); m.cancel(); m.end() }()
	inf, staleAfter := m.l.inf, m.l.inf.t.staleAfter
	silence := time.NewTimer(staleAfter)
	defer silence.Stop()
	for {
		select {
		case <-m.stop:
			return
		case ev, ok := <-m.in.ResultChan():
			if !ok {
				// Ended by the server's timeout, or earlier: dropped.
				if time.Since(m.started) < m.l.inf.t.Renew()-500*time.Millisecond {
					inf.reconnects.Add(1)
				}
				if !m.resumable() || !m.resume() {
					return
				}
				silence.Reset(staleAfter)
				continue
			}
			if ev.Type == watch.Error && clientSide(ev.Object) && m.resumable() {
				// The stream broke on this side (a reset connection):
				// not the API server's answer.
				inf.reconnects.Add(1)
				if !m.resume() {
					return
				}
				silence.Reset(staleAfter)
				continue
			}
			inf.hear()
			listed := false
			if ev.Type != watch.Error {
				if o, err := meta.Accessor(ev.Object); err == nil && o.GetResourceVersion() != "" {
					m.rv = o.GetResourceVersion()
					listed = ev.Type == watch.Bookmark && o.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true"
				}
			}
			select {
			case m.out <- ev:
			case <-m.stop:
				return
			}
			if ev.Type == watch.Error {
				return // the reflector decides: 410 Gone, and it lists
			}
			if listed && m.streaming {
				// The initial events are over: from here it is a watch like
				// any, renewed every Renew, which the stream with the
				// reflector's long timeout would not be.
				m.streaming = false
				if !m.resume() {
					return
				}
			}
			silence.Reset(staleAfter)
		case <-silence.C:
			inf.stalled("watch events")
			if !m.resumable() {
				return // the reflector watches again at once
			}
			inf.reconnects.Add(1)
			if !m.resume() {
				return
			}
			silence.Reset(staleAfter)
		}
	}
}

// resume ends the current watch and opens the next from m.rv. An answer of
// the API server that is an error is passed on as an error event (the
// reflector lists after 410 Gone); it returns whether the watch goes on.
func (m *resuming) resume() bool {
	m.in.Stop()
	m.cancel()
	opts := m.opts
	opts.ResourceVersion, opts.SendInitialEvents, opts.ResourceVersionMatch = m.rv, nil, ""
	opts.TimeoutSeconds = m.l.inf.t.renewSeconds()
	for pause := 100 * time.Millisecond; ; pause = min(2*pause, 2*time.Second) {
		w, cancel, err := m.l.open(m.ctx, opts)
		if err == nil {
			m.in, m.cancel, m.started = w, cancel, time.Now()
			return true
		}
		if m.ctx.Err() != nil {
			return false
		}
		var status apierrors.APIStatus
		if errors.As(err, &status) && status.Status().Code != http.StatusTooManyRequests {
			st := status.Status()
			select {
			case m.out <- watch.Event{Type: watch.Error, Object: &st}:
			case <-m.stop:
			}
			return false
		}
		// The connection failed, or 429 after client-go's own retries:
		// again shortly.
		select {
		case <-m.stop:
			return false
		case <-time.After(pause):
		}
	}
}

// clientSide reports whether an error event is client-go's own, for a stream
// it could not read (a connection reset mid-stream), rather than the API
// server's.
func clientSide(obj runtime.Object) bool {
	st, ok := obj.(*metav1.Status)
	if !ok || st.Details == nil {
		return false
	}
	for _, c := range st.Details.Causes {
		if c.Type == "ClientWatchDecoding" {
			return true
		}
	}
	return false
}
