package soak_test

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/internal/runtime/informers"
	"github.com/vigilkit/vigil/internal/serving/fresh"
	"github.com/vigilkit/vigil/internal/testsupport/bench"
)

// BenchmarkRecheck (make bench-recheck): what a Pod lister's reads and a
// recheck on fresh data cost as the cluster grows. Pods are created across
// 1,000 namespaces, in steps of RECHECK_PODS (1000,50000 by default); at each
// step an informer cache of every Pod (with the admission role's transform)
// serves the reads, and a freshness barrier on it the rechecks. It prints,
// per step, the p50 of a read by key and of a list of one namespace, and the
// p50 and p99 of a recheck's round trip on the scope of each: one Pod, one
// namespace, and the whole type (what every recheck read before it was
// scoped), with the bytes each read from the API server. Run with
// -benchtime 1x.
func BenchmarkRecheck(b *testing.B) {
	var sizes []int
	for s := range strings.SplitSeq(cmp.Or(os.Getenv("RECHECK_PODS"), "1000,50000"), ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || (len(sizes) > 0 && n <= sizes[len(sizes)-1]) {
			b.Fatalf("RECHECK_PODS=%q: want growing positive counts, such as 1000,50000", os.Getenv("RECHECK_PODS"))
		}
		sizes = append(sizes, n)
	}
	rig := newRecheckRig(b, 1000)
	for _, n := range sizes {
		began := time.Now()
		rig.grow(b, n)
		fmt.Printf("recheck-grow: pods=%d took=%s\n", n, time.Since(began).Round(time.Second))
		key, ns, whole := rig.round(b, rig.someKey, 200), rig.round(b, rig.someNamespace, 200), rig.round(b, func() fresh.Scope { return fresh.Scope{} }, 5)
		fmt.Printf("recheck: pods=%d namespaces=%d get_us=%.1f list_ns_us=%.1f recheck_key_p50_ms=%.2f recheck_key_p99_ms=%.2f recheck_key_kib=%.1f recheck_ns_p50_ms=%.2f recheck_ns_p99_ms=%.2f recheck_ns_kib=%.1f recheck_type_p50_ms=%.1f recheck_type_p99_ms=%.1f recheck_type_kib=%.0f\n",
			n, len(rig.namespaces), bench.Us(rig.readKey(b, 2000)), bench.Us(rig.listNamespace(b, 2000)),
			bench.Ms(key.p50), bench.Ms(key.p99), key.kib, bench.Ms(ns.p50), bench.Ms(ns.p99), ns.kib,
			bench.Ms(whole.p50), bench.Ms(whole.p99), whole.kib)
	}
}

// A recheck reads from the API server what its decision read: the round
// trip of one Pod's key, or of one namespace, reads a small part of what
// the whole type's does, and each leaves the cache caught up.
func TestARecheckReadsItsScopeNotTheType(t *testing.T) {
	rig := newRecheckRig(t, 10)
	rig.grow(t, 500)
	key, ns, whole := rig.round(t, rig.someKey, 5), rig.round(t, rig.someNamespace, 5), rig.round(t, func() fresh.Scope { return fresh.Scope{} }, 2)
	t.Logf("KiB read by a round trip: key %.1f, namespace %.1f, whole type %.1f", key.kib, ns.kib, whole.kib)
	if key.kib*20 > whole.kib {
		t.Errorf("a round trip on one key read %.1f KiB, the whole type's %.1f: want under a twentieth of it (500 Pods)", key.kib, whole.kib)
	}
	if ns.kib*4 > whole.kib {
		t.Errorf("a round trip on one of 10 namespaces read %.1f KiB, the whole type's %.1f: want under a quarter of it", ns.kib, whole.kib)
	}
}

// recheckRig is an API server's Pods in some namespaces, a cache of every
// Pod, and the freshness barrier of that cache, whose reads are counted.
type recheckRig struct {
	cs         kubernetes.Interface
	cache      cache.Cache
	barrier    *fresh.Barrier
	read       atomic.Int64 // bytes the barrier read from the API server
	namespaces []string
	pods       int
}

// newRecheckRig makes namespaces namespaces and starts the cache and the
// barrier; the namespaces (and the Pods in them) are deleted at the end.
func newRecheckRig(t testing.TB, namespaces int) *recheckRig {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = -1, 0 // no client-side throttling: the server is what is measured
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := &recheckRig{cs: cs}
	prefix := fmt.Sprintf("recheck-%06d-", rand.IntN(1_000_000))
	for i := range namespaces {
		r.namespaces = append(r.namespaces, prefix+strconv.Itoa(i))
	}
	parallel(t, len(r.namespaces), func(i int) error {
		_, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.namespaces[i]}}, metav1.CreateOptions{})
		return err
	})
	t.Cleanup(func() {
		// Unscheduled Pods go at once; the namespaces finish without a
		// namespace controller as far as the API server lets them.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		for _, ns := range r.namespaces {
			_ = cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
			_ = cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
		}
	})

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c, err := cache.New(rest.CopyConfig(env.Config), cache.Options{Scheme: env.Client.Scheme(), DefaultTransform: informers.Transform()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetInformer(ctx, &corev1.Pod{}); err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("the Pod cache did not sync")
	}
	r.cache = c
	counted := rest.CopyConfig(env.Config)
	counted.QPS, counted.Burst = -1, 0
	counted.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingTransport{rt, &r.read} })
	api, err := client.New(counted, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	r.barrier = fresh.ForCache(api, c, corev1.SchemeGroupVersion.WithKind("Pod"), func() client.Object { return &corev1.Pod{} }, fresh.Selection{}, 30*time.Second)
	// One round trip first, so that the client's discovery of the API is
	// not counted as a recheck's.
	if err := r.barrier.Wait(t.Context(), fresh.KeyScope(r.namespaces[0], "none")); err != nil {
		t.Fatal(err)
	}
	return r
}

// grow creates Pods, spread over the namespaces in turn, until there are n,
// and waits until the cache holds them all.
func (r *recheckRig) grow(t testing.TB, n int) {
	t.Helper()
	from := r.pods
	parallel(t, n-from, func(i int) error {
		i += from
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: r.namespaces[i%len(r.namespaces)], Name: fmt.Sprintf("p-%d", i),
				Labels: map[string]string{"app": fmt.Sprintf("app-%d", i%7), "tier": "web"},
			},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example/app:1"}}},
		}
		_, err := r.cs.CoreV1().Pods(p.Namespace).Create(t.Context(), p, metav1.CreateOptions{})
		return err
	})
	r.pods = n
	deadline := time.Now().Add(5 * time.Minute)
	for {
		pods := &corev1.PodList{}
		if err := r.cache.List(t.Context(), pods); err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cache holds %d Pods of %d after 5 minutes", len(pods.Items), n)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// someKey is the key of a random Pod; someNamespace a random namespace.
func (r *recheckRig) someKey() fresh.Scope {
	i := rand.IntN(r.pods)
	return fresh.KeyScope(r.namespaces[i%len(r.namespaces)], fmt.Sprintf("p-%d", i))
}

func (r *recheckRig) someNamespace() fresh.Scope {
	return fresh.Scope{Namespace: r.namespaces[rand.IntN(len(r.namespaces))]}
}

// roundFigures are the times of a recheck's round trips on one kind of
// scope, and the KiB one of them read, on average.
type roundFigures struct {
	p50, p99 time.Duration
	kib      float64
}

// round times n rechecks, one after another, each on a scope of scopeOf.
func (r *recheckRig) round(t testing.TB, scopeOf func() fresh.Scope, n int) roundFigures {
	t.Helper()
	var took []time.Duration
	before := r.read.Load()
	for range n {
		began := time.Now()
		if err := r.barrier.Wait(t.Context(), scopeOf()); err != nil {
			t.Fatal(err)
		}
		took = append(took, time.Since(began))
	}
	slices.Sort(took)
	return roundFigures{
		p50: bench.Percentile(took, 50), p99: bench.Percentile(took, 99),
		kib: float64(r.read.Load()-before) / 1024 / float64(n),
	}
}

// readKey is the median time of n cache reads by key, as a lister's Get.
func (r *recheckRig) readKey(t testing.TB, n int) time.Duration {
	t.Helper()
	return r.median(t, n, func() error {
		k := r.someKey()
		return r.cache.Get(t.Context(), client.ObjectKey{Namespace: k.Namespace, Name: k.Name}, &corev1.Pod{})
	})
}

// listNamespace is the median time of n cache lists of one namespace, as a
// lister's List with client.InNamespace.
func (r *recheckRig) listNamespace(t testing.TB, n int) time.Duration {
	t.Helper()
	return r.median(t, n, func() error {
		return r.cache.List(t.Context(), &corev1.PodList{}, client.InNamespace(r.someNamespace().Namespace))
	})
}

func (r *recheckRig) median(t testing.TB, n int, read func() error) time.Duration {
	t.Helper()
	took := make([]time.Duration, 0, n)
	for range n {
		began := time.Now()
		if err := read(); err != nil {
			t.Fatal(err)
		}
		took = append(took, time.Since(began))
	}
	slices.Sort(took)
	return bench.Percentile(took, 50)
}

// parallel runs do(i) for i < n on 32 goroutines, failing t on the first
// error.
func parallel(t testing.TB, n int, do func(i int) error) {
	t.Helper()
	var next atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := do(i); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		t.Fatal(first)
	}
}

// countingTransport adds the bytes of every response body it carries to n.
type countingTransport struct {
	rt http.RoundTripper
	n  *atomic.Int64
}

func (c countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.rt.RoundTrip(req)
	if err == nil {
		resp.Body = &countingBody{ReadCloser: resp.Body, n: c.n}
	}
	return resp, err
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}
