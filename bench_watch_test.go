package vigil_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
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
	vigil.When(m.Capability("all"), &corev1.ConfigMap{}).InNamespace(ns).Named("configmaps").
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
// `watch: reconcile_10k=<s>s events_per_s=<n> rss=<MiB>MiB`.
func BenchmarkWatch(b *testing.B) {
	const objects = 10000
	for range b.N {
		ns := env.Namespace(b)
		w := startBenchWatcher(b, ns)
		w.waitReady(b)

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
		rss := w.stop()

		// A fresh watcher over the 10,000 existing objects: list, sync and
		// reconcile each, from exec.
		start = time.Now()
		cold := startBenchWatcher(b, ns)
		cold.waitReconciled(b, query, objects)
		coldTook := time.Since(start)
		coldRSS := cold.stop()

		b.ReportMetric(took.Seconds(), "reconcile_10k_s")
		fmt.Printf("watch: created_10k=%.2fs (16 clients); a fresh watcher over the 10k: reconciled_after=%.2fs rss=%.1fMiB\n", created.Seconds(), coldTook.Seconds(), float64(coldRSS)/1024)
		fmt.Printf("watch: reconcile_10k=%.2fs events_per_s=%.0f rss=%.1fMiB\n", took.Seconds(), objects/took.Seconds(), float64(rss)/1024)
	}
}

type benchWatcher struct {
	cmd     *exec.Cmd
	out     *vigiltest.Buffer
	exited  chan int
	metrics string
	probe   string
}

func startBenchWatcher(b *testing.B, ns string) *benchWatcher {
	w := &benchWatcher{out: &vigiltest.Buffer{}, exited: make(chan int, 1), metrics: freeAddr(b), probe: freeAddr(b)}
	kc := env.KubeConfigFile(b)
	args := []string{"watcher", "--kubeconfig", kc, "--metrics-addr", w.metrics, "--probe-addr", w.probe}
	w.cmd = exec.Command(os.Args[0])
	w.cmd.Env = append(os.Environ(), childRoleEnv+"=bench", "VIGIL_TEST_NAMESPACE="+ns, "VIGIL_TEST_ARGS="+strings.Join(args, " "), "VIGIL_TEST_KUBECONFIG="+kc)
	w.cmd.Stdout, w.cmd.Stderr = w.out, w.out
	if err := w.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	go func() { _ = w.cmd.Wait(); w.exited <- w.cmd.ProcessState.ExitCode() }()
	return w
}

func (w *benchWatcher) waitReady(b *testing.B) { waitReady(b, "http://"+w.probe+"/readyz", w.exited) }

func (w *benchWatcher) waitReconciled(b *testing.B, series string, n float64) {
	deadline := time.Now().Add(5 * time.Minute)
	for reconciled("http://"+w.metrics+"/metrics", series) < n {
		if time.Now().After(deadline) {
			b.Fatalf("not every object reconciled within 5 minutes:\n%s", w.out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop ends the watcher gracefully and returns its peak RSS in KiB.
func (w *benchWatcher) stop() int64 {
	rss := procStatus(w.cmd.Process.Pid, "VmHWM")
	_ = w.cmd.Process.Signal(os.Interrupt)
	<-w.exited
	return rss
}

// reconciled reads one counter from a Prometheus text page.
func reconciled(url, series string) float64 {
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

func procStatus(pid int, field string) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}
