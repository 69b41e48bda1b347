package audit_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/vigilkit/vigil/internal/serving/audit"
)

// streamed runs eachStreamed over a watch that sends events, then closes
// (or not, when open is true), and returns the names fn saw, the options the
// watch was opened with and the error.
func streamed(t *testing.T, events []watch.Event, open bool, fnErr error) ([]string, metav1.ListOptions, error) {
	t.Helper()
	w := watch.NewFakeWithChanSize(len(events), false)
	for _, ev := range events {
		w.Action(ev.Type, ev.Object)
	}
	if !open {
		w.Stop()
	}
	var opts metav1.ListOptions
	var seen []string
	err := audit.EachStreamed(t.Context(), func(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
		opts = o
		return w, nil
	}, func(o runtime.Object) error {
		seen = append(seen, o.(*corev1.ConfigMap).Name)
		return fnErr
	})
	return seen, opts, err
}

func added(name string) watch.Event {
	return watch.Event{Type: watch.Added, Object: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}}
}

func bookmark(end bool) watch.Event {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "9"}}
	if end {
		cm.Annotations = map[string]string{metav1.InitialEventsAnnotationKey: "true"}
	}
	return watch.Event{Type: watch.Bookmark, Object: cm}
}

// A streamed list gives every object its watch sends before the bookmark
// that ends the initial events, asks for exactly that stream, and stops
// there, though the watch stays open.
func TestAStreamEndsAtItsInitialEventsEnd(t *testing.T) {
	seen, opts, err := streamed(t, []watch.Event{added("a"), bookmark(false), added("b"), added("c"), bookmark(true), added("after")}, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(seen, []string{"a", "b", "c"}) {
		t.Errorf("objects %v, want a, b, c and nothing after the end", seen)
	}
	if opts.SendInitialEvents == nil || !*opts.SendInitialEvents || opts.ResourceVersionMatch != metav1.ResourceVersionMatchNotOlderThan || !opts.AllowWatchBookmarks || opts.ResourceVersion != "" {
		t.Errorf("the watch was opened with %+v; want sendInitialEvents, resourceVersionMatch NotOlderThan, bookmarks, no resourceVersion", opts)
	}
}

// A stream that ends before its end, or with an error, or that the API
// server refuses, says so, and how many objects it gave: the audit then
// pages. What fn returns is returned as it is.
func TestAStreamCutShortSaysHowFarItGot(t *testing.T) {
	var broken *audit.StreamError
	if _, _, err := streamed(t, []watch.Event{added("a"), added("b")}, false, nil); !errors.As(err, &broken) || broken.Seen() != 2 {
		t.Errorf("a stream closed after 2 objects: %v; want a stream error having seen 2", err)
	}
	gone := watch.Event{Type: watch.Error, Object: &apierrors.NewResourceExpired("too old").ErrStatus}
	if _, _, err := streamed(t, []watch.Event{added("a"), gone}, true, nil); !errors.As(err, &broken) || broken.Seen() != 1 || !apierrors.IsResourceExpired(err) {
		t.Errorf("a stream ended by 410 after 1 object: %v; want a stream error having seen 1, the 410 kept", err)
	}
	refused := apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("ConfigMap").GroupKind(), "", nil)
	err := audit.EachStreamed(t.Context(), func(context.Context, metav1.ListOptions) (watch.Interface, error) { return nil, refused }, func(runtime.Object) error {
		t.Error("fn called for a stream that was refused")
		return nil
	})
	if !errors.As(err, &broken) || broken.Seen() != 0 || !apierrors.IsInvalid(err) {
		t.Errorf("a stream refused with 422: %v; want a stream error having seen none", err)
	}
	stop := errors.New("stop")
	if seen, _, err := streamed(t, []watch.Event{added("a"), added("b"), bookmark(true)}, true, stop); err != stop || len(seen) != 1 {
		t.Errorf("fn failing on the first object: %v after %v; want fn's error, at once", err, seen)
	}
}
