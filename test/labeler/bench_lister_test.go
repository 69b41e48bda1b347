package labeler

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vigilkit/vigil/internal/testsupport/bench"
)

// BenchmarkAdmissionLister: 10,000 ConfigMaps exist; the listerbench module
// (./listerbench) starts with a Lister of every ConfigMap, and its two
// validations are loaded, in one process, at c=16 over TLS keep-alive: one
// that reads nothing and one that reads the Lister, request by request in
// turn for their latencies, then each on its own for its CPU. It
// prints both latencies, how soon the module was ready with the 10,000
// objects to list, and its memory.
func BenchmarkAdmissionLister(b *testing.B) {
	const objects = 10000
	ns := env.Namespace(b)
	var next atomic.Int64
	var wg sync.WaitGroup
	began := time.Now()
	for range 16 {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= objects {
					return
				}
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprint("cm-", i)}, Data: map[string]string{"i": fmt.Sprint(i)}}
				if err := env.Client.Create(context.Background(), cm); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	created := time.Since(began)
	if b.Failed() {
		return
	}

	l := startModule(b, "./listerbench", nil, "LISTERBENCH_RESERVED_NAMESPACE="+ns)
	pid := l.cmd.Process.Pid
	plain := l.base + "/validate/listerbench/plain"
	cached := l.base + "/validate/listerbench/cached"

	// The Lister holds the 10,000: a ConfigMap named as one of them is
	// refused.
	taken := bytes.ReplaceAll(bytes.ReplaceAll(configMapReview(b, 0), []byte(`"name":"settings"`), []byte(`"name":"cm-4321"`)), []byte(`"name":"x"`), []byte(`"name":"cm-4321"`))
	if resp := l.review(b, "/validate/listerbench/cached", taken); resp.Allowed {
		b.Fatalf("a ConfigMap named as one of the 10,000 was allowed: the Lister does not hold them (%+v)", resp)
	}

	body := configMapReview(b, 0)
	h1 := l.newClient(false)
	// Latency: each worker alternates the two paths, request by request, so
	// that whatever else runs on the machine weighs on both alike.
	none, lister := alternate(b, plain, cached, h1, body, 16, 8*time.Second)
	// CPU per request: each path loaded on its own, in turn.
	var noneCPU, listerCPU []loadResult
	for range 2 {
		noneCPU = append(noneCPU, load(b, pid, "reads nothing", plain, h1, "configmap", body, 16, 2*time.Second))
		listerCPU = append(listerCPU, load(b, pid, "reads the Lister", cached, h1, "configmap", body, 16, 2*time.Second))
	}
	rss := bench.ProcStatus(pid, "VmRSS")
	n, nl := merged(noneCPU), merged(listerCPU)
	fmt.Printf("admission-lister: validate_p99_lister_10k=%.2fms validate_p99_none=%.2fms p99_ratio=%.2f validate_p50_lister_10k=%.2fms validate_p50_none=%.2fms (c16, n=%d each) cpu_per_req_lister_10k=%.1fus cpu_per_req_none=%.1fus rss=%.1fMiB ready_after=%dms (10,000 ConfigMaps to list, created in %.1fs; in ms since the process started: %s)\n",
		ms(pct(lister, 99)), ms(pct(none, 99)), float64(pct(lister, 99))/float64(max(1, pct(none, 99))),
		ms(pct(lister, 50)), ms(pct(none, 50)), min(len(none), len(lister)), us(nl.CPUPerReq), us(n.CPUPerReq), float64(rss)/1024,
		l.readyAfter.Milliseconds(), created.Seconds(), readyParts(l.logs.String()))
}

// alternate sends body to a and b in turn from c workers for d, and returns
// each one's latencies, sorted.
func alternate(tb testing.TB, a, b string, client *http.Client, body []byte, c int, d time.Duration) (latA, latB []time.Duration) {
	var mu sync.Mutex
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	for w := range c {
		wg.Go(func() {
			var mine [2][]time.Duration
			for i := w; time.Now().Before(stop); i++ {
				url := []string{a, b}[i%2]
				t0 := time.Now()
				resp, err := client.Post(url, "application/json", bytes.NewReader(body))
				if err != nil {
					tb.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					tb.Errorf("%s: status %d", url, resp.StatusCode)
					return
				}
				mine[i%2] = append(mine[i%2], time.Since(t0))
			}
			mu.Lock()
			latA, latB = append(latA, mine[0]...), append(latB, mine[1]...)
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.Sort(latA)
	slices.Sort(latB)
	return latA, latB
}

// merged is the loads taken together: their requests and latencies, their
// rate and the CPU per request over all.
func merged(rs []loadResult) loadResult {
	out := rs[0]
	out.Latencies = nil
	out.Requests = 0
	var cpu time.Duration
	var seconds float64
	for _, r := range rs {
		out.Latencies = append(out.Latencies, r.Latencies...)
		out.Requests += r.Requests
		cpu += r.CPUPerReq * time.Duration(r.Requests)
		if r.RPS > 0 {
			seconds += float64(r.Requests) / r.RPS
		}
	}
	slices.Sort(out.Latencies)
	out.CPUPerReq = cpu / time.Duration(max(1, out.Requests))
	out.P50, out.P99 = pct(out.Latencies, 50), pct(out.Latencies, 99)
	if seconds > 0 {
		out.RPS = float64(out.Requests) / seconds
	}
	return out
}
