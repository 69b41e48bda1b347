package fault_test

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/utils/ptr"

	"github.com/vigilkit/vigil/vigiltest"
	"github.com/vigilkit/vigil/vigiltest/fault"
)

var env *vigiltest.Env

func TestMain(m *testing.M) {
	os.Exit(vigiltest.Run(m, vigiltest.Options{}, &env))
}

func faultProxy(t *testing.T) (*fault.Proxy, *kubernetes.Clientset) {
	t.Helper()
	p, err := fault.NewProxy(env.Config, fault.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	cs, err := kubernetes.NewForConfig(p.Config())
	if err != nil {
		t.Fatal(err)
	}
	return p, cs
}

func configMapIn(ns, name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

// Throttle answers 429 with Retry-After: client-go waits it out and its
// request succeeds once the throttling ends.
func TestProxyThrottles(t *testing.T) {
	ns := env.Namespace(t)
	p, cs := faultProxy(t)
	p.Throttle(1500*time.Millisecond, time.Second)
	began := time.Now()
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(t.Context(), configMapIn(ns, "throttled"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create through 1.5s of 429s with Retry-After: 1: %v", err)
	}
	took := time.Since(began)
	s := p.Stats()
	t.Logf("create through 1.5s of 429s: took %s, %d requests throttled", took.Round(10*time.Millisecond), s.Throttled)
	if s.Throttled < 1 || took < time.Second {
		t.Errorf("took %s with %d requests throttled; want the create held at least a second by 429s", took, s.Throttled)
	}
}

// ExpireWatches ends open watches and answers new ones 410 Gone: an
// informer lists again, and still sees what is created afterwards.
func TestProxyExpiresWatches(t *testing.T) {
	ns := env.Namespace(t)
	p, cs := faultProxy(t)
	var added atomic.Int32
	seen := make(chan string, 10)
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	inf := f.Core().V1().ConfigMaps().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(o any) {
		added.Add(1)
		seen <- o.(*corev1.ConfigMap).Name
	}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("the informer did not sync through the proxy")
	}
	p.ExpireWatches(2 * time.Second)
	// A watch resuming from a resourceVersion is answered 410 Gone; one
	// starting with its initial events, a streamed list, is passed on to
	// the API server (which serves it, or refuses it itself where it does
	// not stream lists: never 410).
	resume := metav1.ListOptions{ResourceVersion: inf.LastSyncResourceVersion()}
	if w, err := cs.CoreV1().ConfigMaps(ns).Watch(t.Context(), resume); err == nil {
		w.Stop()
		t.Error("a watch resuming from a resourceVersion during ExpireWatches was served; want 410 Gone")
	} else if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
		t.Errorf("a watch resuming from a resourceVersion during ExpireWatches: %v; want 410 Gone", err)
	}
	stream := metav1.ListOptions{SendInitialEvents: ptr.To(true), AllowWatchBookmarks: true,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}
	if w, err := cs.CoreV1().ConfigMaps(ns).Watch(t.Context(), stream); err == nil {
		w.Stop()
	} else if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
		t.Errorf("a streamed list during ExpireWatches: %v; want it passed on to the API server", err)
	}
	if _, err := env.Clientset.CoreV1().ConfigMaps(ns).Create(t.Context(), configMapIn(ns, "after-expiry"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(30 * time.Second)
	for {
		select {
		case name := <-seen:
			if name != "after-expiry" {
				continue
			}
		case <-deadline:
			t.Fatalf("the informer did not see a ConfigMap created while its watches expired (%d adds, stats %+v)", added.Load(), p.Stats())
		}
		break
	}
	if s := p.Stats(); s.Expired < 1 {
		t.Errorf("stats %+v: want at least one watch answered 410 Gone", s)
	}
}

// Blackhole holds every connection without a reset: a request times out on
// the client's own deadline, and the same connection carries on afterwards.
func TestProxyBlackholes(t *testing.T) {
	ns := env.Namespace(t)
	p, cs := faultProxy(t)
	if _, err := cs.CoreV1().ConfigMaps(ns).List(t.Context(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if held := p.Blackhole(2 * time.Second); held < 1 {
		t.Errorf("Blackhole held %d connections; want the client's open one", held)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	_, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	cancel()
	var netErr net.Error
	if err == nil || !(errors.Is(err, context.DeadlineExceeded) || errors.As(err, &netErr) && netErr.Timeout()) {
		t.Errorf("a list during the blackhole: %v; want the client's own deadline to end it, not a reset", err)
	}
	if s := p.Stats(); s.Reset != 0 {
		t.Errorf("stats %+v: a blackhole reset connections", s)
	}
	time.Sleep(1600 * time.Millisecond)
	if _, err := cs.CoreV1().ConfigMaps(ns).List(t.Context(), metav1.ListOptions{}); err != nil {
		t.Errorf("a list after the blackhole: %v", err)
	}
}

// Cut resets every open connection at once: client-go dials again, and its
// next request succeeds.
func TestProxyCuts(t *testing.T) {
	ns := env.Namespace(t)
	p, cs := faultProxy(t)
	if _, err := cs.CoreV1().ConfigMaps(ns).List(t.Context(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := p.Cut(); n < 1 {
		t.Errorf("Cut reset %d connections; want the client's open one", n)
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).List(t.Context(), metav1.ListOptions{}); err != nil {
		t.Errorf("a list after the cut: %v", err)
	}
	if s := p.Stats(); s.Reset < 1 || s.Accepted < 2 {
		t.Errorf("stats %+v: want the connection reset and a new one accepted", s)
	}
}

// Stall leaves the open connection half-open for good: a request on it gets
// nothing, even after a while, while a new connection is served.
func TestProxyStalls(t *testing.T) {
	ns := env.Namespace(t)
	p, cs := faultProxy(t)
	if _, err := cs.CoreV1().ConfigMaps(ns).List(t.Context(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if held := p.Stall(); held < 1 {
		t.Errorf("Stall held %d connections; want the client's open one", held)
	}
	for range 2 { // still stalled a second later: it does not end
		ctx, cancel := context.WithTimeout(t.Context(), 700*time.Millisecond)
		_, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		cancel()
		if err == nil {
			t.Fatal("a list on the stalled connection succeeded")
		}
	}
	cfg := p.Config()
	cfg.Dial = (&net.Dialer{}).DialContext // a transport of its own, not client-go's cached one: a new connection
	fresh, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fresh.CoreV1().ConfigMaps(ns).List(t.Context(), metav1.ListOptions{}); err != nil {
		t.Errorf("a list on a new connection during the stall: %v", err)
	}
	if s := p.Stats(); s.Stalls != 1 || s.Stalled < 1 || s.Reset != 0 {
		t.Errorf("stats %+v: want one Stall holding the connection, none reset", s)
	}
}

// Cutting every connection breaks an open watch; a retrying watch resumes
// once the proxy lets connections through again and sees what was created
// while it was cut off.
func TestProxyBreaksAndResumesWatches(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	proxy, err := fault.NewProxy(env.Config, fault.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	cs := kubernetes.NewForConfigOrDie(proxy.Config())

	list, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list through the proxy: %v", err)
	}
	plain, err := cs.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Stop()
	lw := &cache.ListWatch{WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		return cs.CoreV1().ConfigMaps(ns).Watch(ctx, o)
	}}
	retry, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, lw)
	if err != nil {
		t.Fatal(err)
	}
	defer retry.Stop()
	// Both watches are open before the cut: each sees a ConfigMap created now.
	if _, err := env.Clientset.CoreV1().ConfigMaps(ns).Create(ctx, configMapIn(ns, "before-outage"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		name string
		w    watch.Interface
	}{{"plain", plain}, {"retrying", retry}} {
		select {
		case ev := <-w.w.ResultChan():
			if cm, ok := ev.Object.(*corev1.ConfigMap); !ok || ev.Type != watch.Added || cm.Name != "before-outage" {
				t.Fatalf("the %s watch's first event is %s %T, want ADDED before-outage", w.name, ev.Type, ev.Object)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the %s watch did not see a ConfigMap created before the cut within 10s", w.name)
		}
	}

	const outage = 2 * time.Second
	if cut := proxy.Outage(outage); cut == 0 {
		t.Fatal("Outage cut no connections, want the open watches' connections cut")
	}
	began := time.Now()
	select {
	case _, open := <-plain.ResultChan():
		if open {
			t.Fatal("the plain watch delivered an event, want it closed by the cut")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the plain watch stayed open after its connection was reset")
	}
	// client-go retries a GET whose connection was reset; bound it well inside
	// the outage so the answer is the outage's.
	listCtx, cancelList := context.WithTimeout(ctx, outage/2)
	_, err = cs.CoreV1().ConfigMaps(ns).List(listCtx, metav1.ListOptions{})
	cancelList()
	if err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("a list through the proxy during the outage: err = %v, want connection refused", err)
	}
	if _, err := env.Clientset.CoreV1().ConfigMaps(ns).Create(ctx, configMapIn(ns, "during-outage"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	waitCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	_, err = watchtools.UntilWithoutRetry(waitCtx, retry, func(ev watch.Event) (bool, error) {
		cm, ok := ev.Object.(*corev1.ConfigMap)
		return ok && ev.Type == watch.Added && cm.Name == "during-outage", nil
	})
	if err != nil {
		t.Fatalf("the retrying watch did not resume: %v", err)
	}
	if waited := time.Since(began); waited < outage-100*time.Millisecond {
		t.Fatalf("the watch resumed after %s, before the %s outage ended", waited, outage)
	}
	st := proxy.Stats()
	if st.Reset == 0 || st.Outages != 1 {
		t.Fatalf("proxy stats %+v: want connections reset by one outage", st)
	}
}

func TestProxyRejectsBadHost(t *testing.T) {
	cfg := *env.Config
	cfg.Host = "::not a url"
	_, err := fault.NewProxy(&cfg, fault.Options{})
	if err == nil || !strings.Contains(err.Error(), "expected the config's host to be a URL") {
		t.Fatalf("err = %v, want it to say what host was expected", err)
	}
	if errors.Unwrap(err) != nil {
		t.Fatalf("err %v wraps %v; the message should stand alone", err, errors.Unwrap(err))
	}
}

// With WatchDelay, watch events arrive that much after the API server sent
// them, while other requests pass at once; Outage still cuts everything.
func TestProxyHoldsBackWatchEvents(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	const delay = 600 * time.Millisecond
	proxy, err := fault.NewProxy(env.Config, fault.Options{WatchDelay: delay})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	cs := kubernetes.NewForConfigOrDie(proxy.Config())
	list, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list through the proxy: %v", err)
	}
	w, err := cs.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	created := time.Now()
	if _, err := env.Clientset.CoreV1().ConfigMaps(ns).Create(ctx, configMapIn(ns, "held"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A list through the proxy is not held: it sees the ConfigMap at once.
	got, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(got.Items) != 1 {
		t.Fatalf("a list through the proxy right after the create: %v items, err %v; want 1", len(got.Items), err)
	}
	if d := time.Since(created); d >= delay {
		t.Fatalf("the create and a list took %s, want less than the watch delay %s for this test to mean anything", d, delay)
	}
	select {
	case ev := <-w.ResultChan():
		if cm, ok := ev.Object.(*corev1.ConfigMap); !ok || ev.Type != watch.Added || cm.Name != "held" {
			t.Fatalf("the watch's first event is %s %T, want ADDED held", ev.Type, ev.Object)
		}
		if d := time.Since(created); d < delay {
			t.Fatalf("the watch event arrived %s after the create, want at least the delay %s", d, delay)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watch saw nothing within 10s")
	}
	if s := proxy.Stats(); s.Watches < 1 {
		t.Fatalf("stats %+v: want the watch counted as held", s)
	}
	if cut := proxy.Outage(time.Second); cut == 0 {
		t.Fatal("Outage cut no connections, want the watch's cut")
	}
	select {
	case _, open := <-w.ResultChan():
		if open {
			t.Fatal("the watch delivered an event, want it closed by the cut")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the watch stayed open after the cut")
	}
}
