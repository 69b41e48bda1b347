package audit_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

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
	var seen []string
	if !open {
		events = append(events, watch.Event{})
	}
	opts, err := streamedWith(t, events, time.Minute, func(o runtime.Object) error {
		seen = append(seen, o.(*corev1.ConfigMap).Name)
		return fnErr
	})
	return seen, opts, err
}

// streamedWith runs eachStreamed with fn and silence over a watch that
// sends events and stays open (an empty event closes it instead), and
// returns the options the watch was opened with and the error.
func streamedWith(t *testing.T, events []watch.Event, silence time.Duration, fn func(runtime.Object) error) (metav1.ListOptions, error) {
	t.Helper()
	w := watch.NewFakeWithChanSize(len(events), false)
	for _, ev := range events {
		if ev.Type == "" {
			w.Stop()
			break
		}
		w.Action(ev.Type, ev.Object)
	}
	var opts metav1.ListOptions
	err := audit.EachStreamed(t.Context(), func(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
		opts = o
		return w, nil
	}, silence, fn)
	return opts, err
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
	err := audit.EachStreamed(t.Context(), func(context.Context, metav1.ListOptions) (watch.Interface, error) { return nil, refused }, time.Minute, func(runtime.Object) error {
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

// A stream that falls silent before its end is given up after the silence,
// and says so and how far it got, whether it falls silent after some
// objects or before the API server answers at all; the time fn takes is
// never counted as silence.
func TestAStreamThatFallsSilentIsGivenUp(t *testing.T) {
	const silence = 100 * time.Millisecond
	within := func(what string, run func() error) error {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- run() }()
		select {
		case err := <-done:
			return err
		case <-time.After(100 * silence):
			t.Fatalf("%s: still waiting after %s with a silence of %s", what, 100*silence, silence)
			return nil
		}
	}
	var broken *audit.StreamError
	err := within("a stream silent after 2 objects", func() error {
		_, err := streamedWith(t, []watch.Event{added("a"), added("b")}, silence, func(runtime.Object) error { return nil })
		return err
	})
	if !errors.As(err, &broken) || broken.Seen() != 2 || !strings.Contains(err.Error(), "gave nothing for 100ms") {
		t.Errorf("a stream silent after 2 objects: %v; want a stream error saying it gave nothing for 100ms, having seen 2", err)
	}
	err = within("an API server that never answers", func() error {
		return audit.EachStreamed(t.Context(), func(ctx context.Context, _ metav1.ListOptions) (watch.Interface, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}, silence, func(runtime.Object) error { return nil })
	})
	if !errors.As(err, &broken) || broken.Seen() != 0 || !strings.Contains(err.Error(), "gave nothing") {
		t.Errorf("an API server that never answers: %v; want a stream error saying it gave nothing, having seen none", err)
	}
	var slow []string
	_, err = streamedWith(t, []watch.Event{added("a"), added("b"), bookmark(true)}, silence, func(o runtime.Object) error {
		slow = append(slow, o.(*corev1.ConfigMap).Name)
		time.Sleep(3 * silence)
		return nil
	})
	if err != nil || !slices.Equal(slow, []string{"a", "b"}) {
		t.Errorf("judging each object for 3 times the silence: %v after %v; want both objects and no error", err, slow)
	}
}
