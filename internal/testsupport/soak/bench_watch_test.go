package soak_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/vigiltest"
)

// benchModule reconciles every ConfigMap of its namespace with a handler
// that only reads it: the watcher's own cost.
func benchModule(ns string) *vigil.Module {
	m := vigil.NewModule("bench", vigil.Options{Namespace: ns})
	vigil.Watch(m.Capability("all"), &corev1.ConfigMap{}).InNamespace(ns).Named("configmaps").
		Reconcile(func(ctx context.Context, cm *corev1.ConfigMap) error {
			_ = len(cm.Data)
			return nil
		})
	return m
}

// BenchmarkWatch (make bench-watch): a watcher process runs, 10,000
// ConfigMaps are created in the real API server, and the benchmark times
// until each has been reconciled once, reading the watcher's reconcile count
// from its /metrics. It ends with
// `watch: reconcile_10k=<s>s events_per_s=<n> rss=<MiB>MiB`, and what the
// 10,000 cached ConfigMaps cost in memory: `watch: rss_per_10k_configmaps=`.
func BenchmarkWatch(b *testing.B) {
	const objects = 10000
	for range b.N {
		ns := env.Namespace(b)
		w := startBenchWatcher(b, ns)
		w.waitReady(b)
		time.Sleep(time.Second) // settled, before its memory is read
		idleRSS, idleHeap := w.Memory("VmRSS"), w.heapInUse()

		c, err := client.New(env.Config, client.Options{})
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		var next atomic.Int64
		var wg sync.WaitGroup
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := next.Add(1) - 1
					if i >= objects {
						return
					}
					cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprint("cm-", i)}, Data: map[string]string{"i": fmt.Sprint(i)}}
					if err := c.Create(context.Background(), cm); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		created := time.Since(start)
		query := `controller_runtime_reconcile_total{controller="bench.all.configmaps",result="success"}`
		w.waitReconciled(b, query, objects)
		took := time.Since(start)
		// What the 10,000 cached objects cost, once the work is done: the
		// resident memory and the Go heap in use, against the watcher idle
		// with none.
		time.Sleep(2 * time.Second)
		cachedRSS, cachedHeap := w.Memory("VmRSS"), w.heapInUse()
		rss := w.stop(b)

		// A fresh watcher over the 10,000 existing objects: list, sync and
		// reconcile each, from exec.
		start = time.Now()
		cold := startBenchWatcher(b, ns)
		cold.waitReconciled(b, query, objects)
		coldTook := time.Since(start)
		coldRSS := cold.stop(b)

		b.ReportMetric(took.Seconds(), "reconcile_10k_s")
		fmt.Printf("watch: created_10k=%.2fs (16 clients); a fresh watcher over the 10k: reconciled_after=%.2fs rss=%.1fMiB\n", created.Seconds(), coldTook.Seconds(), float64(coldRSS)/1024)
		fmt.Printf("watch: reconcile_10k=%.2fs events_per_s=%.0f rss=%.1fMiB\n", took.Seconds(), objects/took.Seconds(), float64(rss)/1024)
		fmt.Printf("watch: rss_per_10k_configmaps=%.1fMiB heap_per_10k_configmaps=%.1fMiB (cached ConfigMaps of one data key; rss idle %.1fMiB, with the 10k cached %.1fMiB; Go heap in use idle %.1fMiB, with the 10k %.1fMiB)\n",
			float64(cachedRSS-idleRSS)/1024, (cachedHeap-idleHeap)/(1<<20), float64(idleRSS)/1024, float64(cachedRSS)/1024, idleHeap/(1<<20), cachedHeap/(1<<20))
	}
}

type benchWatcher struct {
	*vigiltest.Process
	metrics string
	probe   string
}

func startBenchWatcher(b *testing.B, ns string) *benchWatcher {
	metrics, probe := vigiltest.FreeAddr(b), vigiltest.FreeAddr(b)
	kc := env.KubeConfigFile(b)
	p := startChild(b, "bench", map[string]string{"VIGIL_TEST_NAMESPACE": ns, "VIGIL_TEST_KUBECONFIG": kc},
		"watcher", "--kubeconfig", kc, "--metrics-addr", metrics, "--probe-addr", probe)
	return &benchWatcher{Process: p, metrics: metrics, probe: probe}
}

func (w *benchWatcher) waitReady(b *testing.B) { waitReady(b, "http://"+w.probe+"/readyz", w.Exited()) }

func (w *benchWatcher) waitReconciled(b *testing.B, series string, n float64) {
	deadline := time.Now().Add(5 * time.Minute)
	for reconciled("http://"+w.metrics+"/metrics", series) < n {
		if time.Now().After(deadline) {
			b.Fatalf("not every object reconciled within 5 minutes:\n%s", w.Output)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// heapInUse is the watcher's Go heap in use, in bytes, from its /metrics.
func (w *benchWatcher) heapInUse() float64 {
	return reconciled("http://"+w.metrics+"/metrics", "go_memstats_heap_inuse_bytes")
}

// stop ends the watcher gracefully and returns its peak RSS in KiB.
func (w *benchWatcher) stop(b *testing.B) int64 {
	rss := w.Memory("VmHWM")
	w.Stop(b, time.Minute)
	return rss
}
