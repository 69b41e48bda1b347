package audit

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
)

// streamError is why a streamed list could not give every object: the API
// server refused to stream it (a server without the WatchList feature
// answers 422), or the stream ended before its last object. Seen says how
// many objects it had given by then.
type streamError struct {
	err  error
	seen int64
}

func (e *streamError) Error() string { return e.err.Error() }
func (e *streamError) Unwrap() error { return e.err }

// eachStreamed calls fn with each object of a kind as one watch streams
// them (a watch-list: sendInitialEvents, ended by the bookmark that marks
// the initial events' end), an object at a time: one request however many
// objects there are, where a list pages them in as many round trips as
// pages, each waiting on a busy API server; and no page held, only the
// object being judged and what the connection buffers. The objects are
// those the API server's watch cache holds at a resourceVersion at least
// as new as when the watch began, as a list's are.
//
// It returns a *streamError when the API server refuses to stream, or the
// stream ends before its end (the caller then pages: see auditRun.each),
// and fn's own error as fn returns it.
func eachStreamed(ctx context.Context, open func(context.Context, metav1.ListOptions) (watch.Interface, error), fn func(runtime.Object) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := open(ctx, metav1.ListOptions{
		SendInitialEvents:    ptr.To(true),
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
		AllowWatchBookmarks:  true,
	})
	if err != nil {
		return &streamError{err: fmt.Errorf("streaming the list: %w", err)}
	}
	defer w.Stop()
	var seen int64
	for ev := range w.ResultChan() {
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
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return &streamError{err: errors.New("the streamed list ended before its last object"), seen: seen}
}
