package store_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/vigilkit/vigil/internal/testsupport/bench"
	"github.com/vigilkit/vigil/store"
)

// figures of the last run of each benchmark, for the summary TestMain prints.
var figures struct {
	mu          sync.Mutex
	setPerSec   map[int]float64
	waitLatency map[int][]time.Duration
	lost        int
}

// BenchmarkStoreSet measures Set throughput of one replica with 1 and 8
// concurrent writers against the real API server.
func BenchmarkStoreSet(b *testing.B) {
	for _, writers := range []int{1, 8} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			s := start(b, env.Config, env.Namespace(b))
			elapsed := runWriters(b, s, writers, b.N, func(ctx context.Context, key, value string) error { return s.Set(ctx, key, value) }, nil)
			perSec := float64(b.N) / elapsed.Seconds()
			b.ReportMetric(perSec, "sets/s")
			figures.mu.Lock()
			if figures.setPerSec == nil {
				figures.setPerSec = map[int]float64{}
			}
			figures.setPerSec[writers] = perSec
			figures.mu.Unlock()
		})
	}
}

// BenchmarkStoreSetAndWait measures the latency of SetAndWait (write accepted
// and seen by this replica's watch) with 1 and 8 concurrent writers.
func BenchmarkStoreSetAndWait(b *testing.B) {
	for _, writers := range []int{1, 8} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			s := start(b, env.Config, env.Namespace(b))
			var mu sync.Mutex
			var lat []time.Duration
			runWriters(b, s, writers, b.N, func(ctx context.Context, key, value string) error {
				return s.SetAndWait(ctx, key, value)
			}, func(d time.Duration) { mu.Lock(); lat = append(lat, d); mu.Unlock() })
			slices.Sort(lat)
			b.ReportMetric(bench.Ms(bench.Percentile(lat, 50)), "p50-ms")
			b.ReportMetric(bench.Ms(bench.Percentile(lat, 99)), "p99-ms")
			figures.mu.Lock()
			if figures.waitLatency == nil {
				figures.waitLatency = map[int][]time.Duration{}
			}
			figures.waitLatency[writers] = lat
			figures.mu.Unlock()
		})
	}
}

// runWriters spreads n writes over the writers, each writing its own keys, and
// then checks that the store holds every writer's last value of every key.
func runWriters(b *testing.B, s *store.Client, writers, n int, write func(ctx context.Context, key, value string) error, observe func(time.Duration)) time.Duration {
	const keysPerWriter = 50
	ctx := b.Context()
	last := make([]map[string]string, writers)
	var wg sync.WaitGroup
	b.ResetTimer()
	began := time.Now()
	for w := range writers {
		last[w] = map[string]string{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += writers {
				key := fmt.Sprintf("w%d-k%d", w, i%keysPerWriter)
				value := strconv.Itoa(i)
				t0 := time.Now()
				if err := write(ctx, key, value); err != nil {
					b.Error(err)
					return
				}
				if observe != nil {
					observe(time.Since(t0))
				}
				last[w][key] = value
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(began)
	b.StopTimer()
	// Let the watch catch up, then count what did not arrive.
	if err := s.SetAndWait(ctx, "bench-done", strconv.Itoa(n)); err != nil {
		b.Fatal(err)
	}
	lost := 0
	for _, m := range last {
		for k, v := range m {
			if got, _ := get(b, s, k); got != v {
				lost++
			}
		}
	}
	figures.mu.Lock()
	figures.lost += lost
	figures.mu.Unlock()
	if lost > 0 {
		b.Errorf("%d writes lost", lost)
	}
	return elapsed
}

// printBenchSummary prints the table and the summary line when benchmarks ran.
func printBenchSummary() {
	figures.mu.Lock()
	defer figures.mu.Unlock()
	if figures.setPerSec == nil || figures.waitLatency == nil {
		return
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "writers\tset/s\tsetandwait p50\tsetandwait p99\tsamples")
	for _, w := range []int{1, 8} {
		lat := figures.waitLatency[w]
		fmt.Fprintf(tw, "%d\t%.0f\t%.2f ms\t%.2f ms\t%d\n", w, figures.setPerSec[w], bench.Ms(bench.Percentile(lat, 50)), bench.Ms(bench.Percentile(lat, 99)), len(lat))
	}
	tw.Flush()
	// The summary takes the single writer's SetAndWait latency (what a gate
	// handing over its result sees) and the 8 writers' Set throughput.
	lat := figures.waitLatency[1]
	fmt.Printf("store: set=%.0f/s setandwait_p50=%.2fms setandwait_p99=%.2fms lost=%d\n",
		figures.setPerSec[8], bench.Ms(bench.Percentile(lat, 50)), bench.Ms(bench.Percentile(lat, 99)), figures.lost)
}
