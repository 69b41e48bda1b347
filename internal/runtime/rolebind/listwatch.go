package rolebind

import (
	"context"
	"fmt"
	"regexp"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

// forbiddenIn finds the namespace in the API server's refusal of a
// namespaced request: `... cannot list resource "pods" in API group "" in
// the namespace "apps"`.
var forbiddenIn = regexp.MustCompile(`in the namespace "([^"]+)"`)

const (
	// bindPoll is how often a waiting informer looks for its namespace.
	bindPoll = time.Second
	// bindSettle bounds the wait for a new RoleBinding to be in force.
	bindSettle = 10 * time.Second
)

// bindingLW is a list-watch that, refused in a namespace that does not
// exist yet, lists it empty and waits for it.
type bindingLW struct {
	toolscache.ListerWatcherWithContext
	binder  *Binder
	newList func() runtime.Object

	mu      sync.Mutex
	pending string // the namespace waited for, while it does not exist
}

// ListWatch wraps lw for binder (none when nil): refused in a namespace
// that does not exist yet, it lists that namespace empty and waits for it
// to exist, when the role's clients (see Instrument) bind its rights there;
// then it ends its watch with 410 Gone and the reflector lists again, for
// real. obj is the informer's example object, gvk its kind, and scheme
// knows its list type.
func ListWatch(lw toolscache.ListerWatcher, binder *Binder, obj runtime.Object, gvk schema.GroupVersionKind, scheme *runtime.Scheme) toolscache.ListerWatcher {
	if binder == nil {
		return lw
	}
	listGVK := gvk.GroupVersion().WithKind(gvk.Kind + "List")
	newList := func() runtime.Object {
		switch obj.(type) {
		case *unstructured.Unstructured:
			l := &unstructured.UnstructuredList{}
			l.SetGroupVersionKind(listGVK)
			return l
		case *metav1.PartialObjectMetadata:
			l := &metav1.PartialObjectMetadataList{}
			l.SetGroupVersionKind(listGVK)
			return l
		}
		if scheme == nil {
			return nil
		}
		if l, err := scheme.New(listGVK); err == nil {
			return l
		}
		return nil
	}
	return &bindingLW{ListerWatcherWithContext: toolscache.ToListerWatcherWithContext(lw), binder: binder, newList: newList}
}

// absent is the namespace, not existing yet, in which err refused a
// request; "" for any other error.
func (l *bindingLW) absent(ctx context.Context, err error) string {
	if !apierrors.IsForbidden(err) {
		return ""
	}
	match := forbiddenIn.FindStringSubmatch(err.Error())
	if match == nil {
		return ""
	}
	if exists, _, berr := l.binder.Bind(ctx, match[1]); berr != nil || exists {
		return ""
	}
	return match[1]
}

// List is the deprecated form of ListWithContext.
func (l *bindingLW) List(opts metav1.ListOptions) (runtime.Object, error) {
	return l.ListWithContext(context.Background(), opts)
}

// Watch is the deprecated form of WatchWithContext.
func (l *bindingLW) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return l.WatchWithContext(context.Background(), opts)
}

func (l *bindingLW) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	obj, err := l.ListerWatcherWithContext.ListWithContext(ctx, opts)
	if ns := l.absent(ctx, err); ns != "" {
		if empty := l.newList(); empty != nil {
			l.setPending(ns)
			return empty, nil
		}
	}
	return obj, err
}

func (l *bindingLW) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	if ns := l.pendingNS(); ns != "" {
		if opts.SendInitialEvents != nil && *opts.SendInitialEvents {
			// A streaming list: refused, so that the reflector lists,
			// which lists the namespace empty.
			return nil, apierrors.NewForbidden(schema.GroupResource{}, "", fmt.Errorf("namespace %s does not exist yet", ns))
		}
		return l.await(ctx, ns, opts.TimeoutSeconds), nil
	}
	w, err := l.ListerWatcherWithContext.WatchWithContext(ctx, opts)
	if ns := l.absent(ctx, err); ns != "" {
		l.setPending(ns)
	}
	return w, err
}

// await is a watch that says nothing until namespace ns exists and the
// role's rights there are in force, then ends with 410 Gone: the reflector
// lists it again, for real. As a watch of the API server, it ends after
// timeoutSeconds (when set) without an event, and the reflector watches
// again: an informer that waits for its namespace for days is renewed as
// any other, and its role's health tracker never finds it stale.
func (l *bindingLW) await(ctx context.Context, ns string, timeoutSeconds *int64) watch.Interface {
	var cancel context.CancelFunc
	if timeoutSeconds != nil && *timeoutSeconds > 0 {
		ctx, cancel = context.WithTimeout(ctx, time.Duration(*timeoutSeconds)*time.Second)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	ch := make(chan watch.Event, 1)
	go func() {
		defer close(ch)
		for sleep(ctx, bindPoll) == nil {
			exists, _, err := l.binder.Bind(ctx, ns)
			if err != nil || !exists {
				continue
			}
			deadline := time.Now().Add(bindSettle)
			for time.Now().Before(deadline) {
				_, err := l.ListerWatcherWithContext.ListWithContext(ctx, metav1.ListOptions{Limit: 1})
				if !apierrors.IsForbidden(err) {
					break
				}
				if sleep(ctx, 100*time.Millisecond) != nil {
					return
				}
			}
			l.setPending("")
			select {
			case ch <- watch.Event{Type: watch.Error, Object: &metav1.Status{
				Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired,
				Message: fmt.Sprintf("namespace %s exists now: list it", ns),
			}}:
			case <-ctx.Done():
			}
			return
		}
	}()
	return &awaitWatch{ch: ch, stop: cancel}
}

func (l *bindingLW) setPending(ns string) {
	l.mu.Lock()
	l.pending = ns
	l.mu.Unlock()
}

func (l *bindingLW) pendingNS() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pending
}

// IsWatchListSemanticsUnSupported passes on what the wrapped list-watch says
// of streaming lists.
func (l *bindingLW) IsWatchListSemanticsUnSupported() bool {
	u, ok := l.ListerWatcherWithContext.(interface{ IsWatchListSemanticsUnSupported() bool })
	return ok && u.IsWatchListSemanticsUnSupported()
}

type awaitWatch struct {
	ch   chan watch.Event
	stop context.CancelFunc
}

func (w *awaitWatch) Stop()                          { w.stop() }
func (w *awaitWatch) ResultChan() <-chan watch.Event { return w.ch }

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
