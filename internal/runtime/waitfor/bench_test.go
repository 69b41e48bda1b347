package waitfor_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vigilkit/vigil/gate"
	"github.com/vigilkit/vigil/internal/runtime/waitfor"
	"github.com/vigilkit/vigil/internal/testsupport/bench"
	"github.com/vigilkit/vigil/vigiltest"
)

// figures of the last run of each benchmark, for the summary line.
var figures struct {
	mu           sync.Mutex
	react        []time.Duration
	kubectl      []time.Duration
	satisfied    []time.Duration
	satisfiedRSS int64 // KiB, the most of any run
}

// BenchmarkGates measures, against the real API server: how soon a waiting
// gate sees an object created (reaction), the same for `kubectl wait
// --for=create`, and an already-satisfied gate run as a process.
func BenchmarkGates(b *testing.B) {
	b.Run("react", benchReact)
	b.Run("kubectl-wait", benchKubectl)
	b.Run("satisfied-exec", benchSatisfied)
	printGatesSummary(b)
}

// benchReact: a gate waits; the object is created; the time from the create
// being sent to the gate being done.
func benchReact(b *testing.B) {
	ns := env.Namespace(b)
	w := newWaiter(b, env.Config)
	var lat []time.Duration
	for i := range b.N {
		name := fmt.Sprint("react-", i)
		listed := make(chan struct{})
		var once sync.Once
		done := make(chan error, 1)
		var finished time.Time
		go func() {
			_, err := w.Wait(b.Context(), waitfor.Spec{GVK: configMapGVK, Namespace: ns, Name: name, Cond: gate.Created()}, func(p waitfor.Progress) {
				if p.State == "not found" {
					once.Do(func() { close(listed) })
				}
			})
			finished = time.Now()
			done <- err
		}()
		<-listed
		// From the create's start: the watch event often arrives before the
		// create's own response.
		issued := time.Now()
		if err := env.Client.Create(b.Context(), cm(ns, name, nil, nil)); err != nil {
			b.Fatal(err)
		}
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		lat = append(lat, finished.Sub(issued))
	}
	report(b, lat)
	figures.mu.Lock()
	figures.react = lat
	figures.mu.Unlock()
}

// benchKubectl: the same with kubectl wait --for=create, started well before
// the create so that it is polling.
func benchKubectl(b *testing.B) {
	ns := env.Namespace(b)
	kc := writeKubeconfig(b)
	kubectl := filepath.Join(env.BinDir, "kubectl")
	var lat []time.Duration
	for i := range b.N {
		name := fmt.Sprint("kubectl-", i)
		cmd := exec.Command(kubectl, "wait", "--for=create", "configmap/"+name, "-n", ns, "--timeout=60s", "--kubeconfig", kc)
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond) // started and polling
		issued := time.Now()
		if err := env.Client.Create(b.Context(), cm(ns, name, nil, nil)); err != nil {
			b.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			b.Fatalf("kubectl wait: %v", err)
		}
		lat = append(lat, time.Since(issued))
	}
	report(b, lat)
	figures.mu.Lock()
	figures.kubectl = lat
	figures.mu.Unlock()
}

// benchSatisfied: an example module's phase whose gates already hold, run as
// a process: exec to exit, and peak memory.
func benchSatisfied(b *testing.B) {
	ctx := b.Context()
	ns := env.Namespace(b)
	dir := b.TempDir()
	src := filepath.Join("..", "..", "..", "examples", "phases")
	bin := vigiltest.BuildModule(b, "./"+src) // as a module's image ships it

	// Phase 0 of the example waits for its CRD and a ConfigMap: make both hold.
	crd, err := os.ReadFile(filepath.Join(src, "widgets-crd.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	if err := env.InstallCRDYAML(crd); err != nil {
		b.Fatal(err)
	}
	if err := env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings"}}); err != nil {
		b.Fatal(err)
	}
	kc := writeKubeconfig(b)
	var lat []time.Duration
	var rss int64
	b.ResetTimer()
	for i := range b.N {
		cmd := exec.Command(bin, "gate", "--phase", "0")
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kc, "VIGIL_NAMESPACE="+ns, "VIGIL_HANDOFF_DIR="+dir)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		began := time.Now()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		// Sampling memory costs CPU on a small machine: time most runs
		// without it and sample every tenth.
		peak := func() int64 { return 0 }
		if i%10 == 0 {
			peak = watchPeak(cmd.Process.Pid)
		}
		if err := cmd.Wait(); err != nil {
			b.Fatalf("satisfied gate: %v\n%s", err, out.String())
		}
		if i%10 != 0 {
			lat = append(lat, time.Since(began))
		}
		rss = max(rss, peak())
	}
	report(b, lat)
	b.ReportMetric(float64(rss)/1024, "peak-MiB")
	figures.mu.Lock()
	figures.satisfied, figures.satisfiedRSS = lat, rss
	figures.mu.Unlock()
}

// watchPeak samples the process's VmHWM (peak resident set) every
// millisecond until it exits, and returns a function giving the last sample,
// in KiB. The rusage of a child started from this process is no use: it
// inherits this process's own peak through the shared address space of the
// vfork that os/exec uses.
func watchPeak(pid int) func() int64 {
	var mu sync.Mutex
	var peak int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		path := fmt.Sprintf("/proc/%d/status", pid)
		for {
			if data, err := os.ReadFile(path); err == nil {
				for _, line := range strings.Split(string(data), "\n") {
					if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
						if kib, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64); err == nil {
							mu.Lock()
							peak = max(peak, kib)
							mu.Unlock()
						}
					}
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	return func() int64 {
		close(stop)
		<-done
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
}

func writeKubeconfig(b *testing.B) string { return env.KubeConfigFile(b) }

func report(b *testing.B, lat []time.Duration) {
	s := slices.Clone(lat)
	slices.Sort(s)
	b.ReportMetric(bench.Ms(bench.Percentile(s, 50)), "p50-ms")
	b.ReportMetric(bench.Ms(bench.Percentile(s, 99)), "p99-ms")
}

func printGatesSummary(b *testing.B) {
	figures.mu.Lock()
	defer figures.mu.Unlock()
	sorted := func(d []time.Duration) []time.Duration { s := slices.Clone(d); slices.Sort(s); return s }
	react, kubectl, satisfied := sorted(figures.react), sorted(figures.kubectl), sorted(figures.satisfied)
	fmt.Printf("gates: react_p50=%.2fms react_p99=%.2fms kubectl_wait_p50=%.2fms satisfied_exec=%.2fms satisfied_rss=%.1fMiB\n",
		bench.Ms(bench.Percentile(react, 50)), bench.Ms(bench.Percentile(react, 99)), bench.Ms(bench.Percentile(kubectl, 50)), bench.Ms(bench.Percentile(satisfied, 50)), float64(figures.satisfiedRSS)/1024)
}
