package audit

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
)

// streamError is why a streamed list could not give every object: the API
// server refused to stream it (a server without the WatchList feature
// answers 422), or the stream ended or fell silent before its last object.
// Seen says how many objects it had given by then.
type streamError struct {
	err  error
	seen int64
	// stalled: the stream fell silent, rather than ending or being refused.
	stalled bool
}

func (e *streamError) Error() string { return e.err.Error() }
func (e *streamError) Unwrap() error { return e.err }

// DefaultStreamSilence is how long a streamed list may give nothing, when
// Auditor.StreamSilence is zero, before the audit gives it up and pages. A
// stream gives its objects as fast as the API server's watch cache sends
// them (50,000 Pods in under 40 s on a saturated 2-core API server): a
// silence this long is a stall, not a slow server. A list page takes at
// most the API server's request timeout, 60 s.
const DefaultStreamSilence = 30 * time.Second

// eachStreamed calls fn with each object of a kind as one watch streams
// them (a watch-list: sendInitialEvents, ended by the bookmark that marks
// the initial events' end), an object at a time: one request however many
// objects there are, where a list pages them in as many round trips as
// pages, each waiting on a busy API server; and no page held, only the
// object being judged and what the connection buffers. The objects are
// those the API server's watch cache holds at a resourceVersion at least
// as new as when the watch began, as a list's are.
//
// A stream that gives nothing for silence (nor its end) is given up: an
// API server that stops sending, or a proxy before it that holds a watch's
// bytes back, would otherwise hold the audit for as long as the connection
// lives. The silence counts from the request and from each event, never
// the time fn takes.
//
// It returns a *streamError when the API server refuses to stream, or the
// stream ends or falls silent before its end (the caller then pages: see
// auditRun.each), and fn's own error as fn returns it.
func eachStreamed(ctx context.Context, open func(context.Context, metav1.ListOptions) (watch.Interface, error), silence time.Duration, fn func(runtime.Object) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var stalled atomic.Bool
	quiet := time.AfterFunc(silence, func() {
		stalled.Store(true)
		cancel()
	})
	defer quiet.Stop()
	var seen int64
	silent := func() error {
		return &streamError{err: fmt.Errorf("the streamed list gave nothing for %s before its last object", silence), seen: seen, stalled: true}
	}
	w, err := open(ctx, metav1.ListOptions{
		SendInitialEvents:    ptr.To(true),
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
		AllowWatchBookmarks:  true,
	})
	if err != nil {
		if stalled.Load() {
			return silent()
		}
		return &streamError{err: fmt.Errorf("streaming the list: %w", err)}
	}
	defer w.Stop()
	for ev := range untilDone(ctx, w) {
		if !quiet.Stop() {
			// The timer runs whenever an event is awaited: it fired, and
			// its cancel may not have run yet.
			return silent()
		}
		switch ev.Type {
		case watch.Added:
			seen++
			if err := fn(ev.Object); err != nil {
				return err
			}
		case watch.Bookmark:
			if o, ok := ev.Object.(metav1.Object); ok && o.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
				return nil
			}
		case watch.Error:
			return &streamError{err: fmt.Errorf("the streamed list ended with an error: %w", apierrors.FromObject(ev.Object)), seen: seen}
		}
		// A change after the initial events begins comes after their end:
		// the stream has none to give before it.
		quiet.Reset(silence)
	}
	if stalled.Load() {
		return silent()
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return &streamError{err: errors.New("the streamed list ended before its last object"), seen: seen}
}

// untilDone is w's events until w ends them or ctx ends: a watch that holds
// back its events need not also notice that its request was cancelled.
func untilDone(ctx context.Context, w watch.Interface) iter.Seq[watch.Event] {
	return func(yield func(watch.Event) bool) {
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.ResultChan():
				if !ok || !yield(ev) {
					return
				}
			}
		}
	}
}
