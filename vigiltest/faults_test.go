package vigiltest_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/vigilkit/vigil/vigiltest"
)

func faultProxy(t *testing.T) (*vigiltest.FaultProxy, *kubernetes.Clientset) {
	t.Helper()
	p, err := vigiltest.NewFaultProxy(env.Config)
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
func TestFaultProxyThrottles(t *testing.T) {
	ns := env.Namespace(t)
	p, cs := faultProxy(t)
	if err := p.Throttle(1500*time.Millisecond, time.Second); err != nil {
		t.Fatal(err)
	}
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
func TestFaultProxyExpiresWatches(t *testing.T) {
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
	if err := p.ExpireWatches(2 * time.Second); err != nil {
		t.Fatal(err)
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
func TestFaultProxyBlackholes(t *testing.T) {
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
func TestFaultProxyCuts(t *testing.T) {
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
func TestFaultProxyStalls(t *testing.T) {
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
