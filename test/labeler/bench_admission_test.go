package labeler

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/google/pprof/profile"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/internal/testsupport/bench"
	"github.com/vigilkit/vigil/store"
)

// client returns an HTTP/1.1 keep-alive client trusting the labeler's CA, or
// an HTTP/2 one (one connection, its streams shared by the workers, as the
// API server's webhook client speaks it).
func (l *labeler) newClient(h2 bool) *http.Client {
	cfg := &tls.Config{RootCAs: l.serving.Pool}
	t := &http.Transport{TLSClientConfig: cfg, MaxIdleConnsPerHost: 128}
	if h2 {
		t.ForceAttemptHTTP2 = true
	} else {
		t.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: t}
}

// BenchmarkAdmission loads the labeler over TLS keep-alive with a ConfigMap
// and a Pod payload — its mutate path, its validate path, and the floor
// server (serveFloor) under the same load in the same run — at concurrency
// 16 and 64 (and the mutate path at 1), and reports throughput, latency, each
// server's own CPU per request and vigil's ratio to the floor; HTTP/2 beside
// HTTP/1.1; where the CPU goes (a profile of the labeler under load); its
// memory idle and under load; and how soon it is ready, part by part. Run it
// with -benchtime 1x: each load runs for a fixed time.
func BenchmarkAdmission(b *testing.B) {
	l := startLabelerWith(b, []string{"--pprof"})
	fl := startFloor(b, l)
	pid := l.cmd.Process.Pid
	time.Sleep(300 * time.Millisecond) // the scenario: idle a moment before the idle RSS is read
	rssIdle := bench.ProcStatus(pid, "VmRSS")
	payloads := []struct {
		name string
		body []byte
	}{{"configmap", configMapReview(b, 0)}, {"pod", podReview(b)}}
	const d = 2 * time.Second
	h1 := l.newClient(false)
	mutate, validate := l.base+mutatePath, l.base+validatePath
	var results []loadResult
	for _, p := range payloads {
		results = append(results, load(b, pid, "vigil mutate", mutate, h1, p.name, p.body, 1, d))
		for _, c := range []int{16, 64} {
			// Interleaved, three rounds taken together, so that what else
			// runs on the machine weighs on each alike.
			var m, f, v []loadResult
			for range 3 {
				m = append(m, load(b, pid, "vigil mutate", mutate, h1, p.name, p.body, c, d))
				f = append(f, load(b, fl.Cmd.Process.Pid, "floor", fl.Base+"/mutate", h1, p.name, p.body, c, d))
				v = append(v, load(b, pid, "vigil validate", validate, h1, p.name, p.body, c, d))
			}
			results = append(results, merged(m), merged(f), merged(v))
		}
	}
	// HTTP/2: the labeler serves HTTP/1.1 alone (see internal/serving/webhook), so
	// the protocol's own cost is measured on the floor server.
	h2 := l.newClient(true)
	cm := payloads[0].body
	h2Results := []loadResult{
		load(b, fl.Cmd.Process.Pid, "floor h2", fl.Base+"/mutate", h2, "configmap", cm, 16, d),
		load(b, fl.Cmd.Process.Pid, "floor", fl.Base+"/mutate", h1, "configmap", cm, 16, d),
		load(b, pid, "vigil mutate, h2 offered", mutate, h2, "configmap", cm, 16, d),
	}
	rssLoad := bench.ProcStatus(pid, "VmHWM")
	// The profiles are taken under loads of their own: profiling costs CPU.
	mutateShares := l.profileShares(b, "mutate", mutate, h1, cm)
	validateShares := l.profileShares(b, "validate", validate, h1, cm)

	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "payload\tserver\tconcurrency\trequests\treq/s\tp50\tp99\tserver cpu/req")
	for _, r := range append(results, h2Results...) {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.0f\t%.2f ms\t%.2f ms\t%.1f µs\n", r.Payload, r.Target, r.Concurrency, r.Requests, r.RPS, ms(r.P50), ms(r.P99), us(r.CPUPerReq))
	}
	tw.Flush()
	find := func(rs []loadResult, payload, target string, c int) loadResult {
		for _, r := range rs {
			if r.Payload == payload && r.Target == target && r.Concurrency == c {
				return r
			}
		}
		return loadResult{}
	}
	for _, name := range []string{"configmap", "pod"} {
		for _, c := range []int{16, 64} {
			m, v, f := find(results, name, "vigil mutate", c), find(results, name, "vigil validate", c), find(results, name, "floor", c)
			prefix := "admission"
			if name == "pod" {
				prefix = "admission-pod"
			}
			if c == 64 {
				prefix += "-c64"
			}
			fmt.Printf("%s: c%d_rps=%.0f c%d_p50=%.2fms c%d_p99=%.2fms cpu_per_req=%.1fus cpu_per_req_validate=%.1fus floor_cpu_per_req=%.1fus vs_floor=%.2fx vs_floor_validate=%.2fx floor_rps=%.0f",
				prefix, c, m.RPS, c, ms(m.P50), c, ms(m.P99), us(m.CPUPerReq), us(v.CPUPerReq), us(f.CPUPerReq), ratio(m, f), ratio(v, f), f.RPS)
			if c == 16 {
				fmt.Printf(" rss_idle=%.1fMiB rss_load=%.1fMiB ready_after=%dms", float64(rssIdle)/1024, float64(rssLoad)/1024, l.readyAfter.Milliseconds())
			}
			fmt.Println()
		}
	}
	h2f, h1f, offered := h2Results[0], h2Results[1], h2Results[2]
	fmt.Printf("admission-h2: the labeler answers HTTP/1.1 to a client offering h2 (cpu_per_req=%.1fus); the floor over HTTP/2 floor_h2_cpu_per_req=%.1fus against floor_cpu_per_req=%.1fus over HTTP/1.1 keep-alive, %.2fx (c16: %.0f against %.0f req/s)\n",
		us(offered.CPUPerReq), us(h2f.CPUPerReq), us(h1f.CPUPerReq), ratio(h2f, h1f), h2f.RPS, h1f.RPS)
	fmt.Printf("admission-profile mutate (configmap, c16, share of the labeler's CPU): %s\n", mutateShares)
	fmt.Printf("admission-profile validate (configmap, c16, share of the labeler's CPU): %s\n", validateShares)
	fmt.Printf("admission-ready: ready_after=%dms (exec to /readyz 200, asked every 2 ms; the Store CRD installed and served just before), in ms since the process started: %s\n", l.readyAfter.Milliseconds(), readyParts(l.logs.String()))

	// With no Store CRD: the module installs it, and is ready once the API
	// server serves it.
	_ = l.cmd.Process.Kill()
	_, _ = l.cmd.Process.Wait()
	fl.Stop()
	if err := deleteStoreCRD(b.Context()); err != nil {
		b.Fatal(err)
	}
	fresh := startModuleCRD(b, labelerDir, false, nil)
	fmt.Printf("admission-ready-new-crd: ready_after=%dms (exec to /readyz 200 with no Store CRD: the module installs it), in ms since the process started: %s\n", fresh.readyAfter.Milliseconds(), readyParts(fresh.logs.String()))
}

// deleteStoreCRD deletes the Store CRD and waits until it is gone.
func deleteStoreCRD(ctx context.Context) error {
	crd, err := store.CRD()
	if err != nil {
		return err
	}
	if err := env.Client.Delete(ctx, crd); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(crd), &apiextensionsv1.CustomResourceDefinition{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the Store CRD is not gone within a minute (last: %v)", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// readyParts is what the role's admission-ready line says of its start.
func readyParts(logs string) string {
	line := regexp.MustCompile(`event=admission-ready .*`).FindString(logs)
	if line == "" {
		return "(no admission-ready line in the log)"
	}
	var parts []string
	for _, m := range regexp.MustCompile(`(\w+)_ms=([0-9.]+)`).FindAllStringSubmatch(line, -1) {
		parts = append(parts, m[1]+"="+m[2])
	}
	return strings.Join(parts, " ")
}

// profileShares takes a CPU profile of the labeler while url is loaded at
// c=16, and says where the time went.
func (l *labeler) profileShares(b *testing.B, name, url string, client *http.Client, body []byte) string {
	const seconds = 3
	got := make(chan []byte, 1)
	go func() {
		resp, err := http.Get(fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", l.metrics, seconds))
		if err != nil {
			b.Error(err)
			got <- nil
			return
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		got <- data
	}()
	time.Sleep(50 * time.Millisecond)
	load(b, l.cmd.Process.Pid, "profiled", url, client, "configmap", body, 16, seconds*time.Second+200*time.Millisecond)
	data := <-got
	p, err := profile.ParseData(data)
	if err != nil {
		return "(no profile: " + err.Error() + ")"
	}
	path := filepath.Join(os.TempDir(), "labeler-"+name+".pprof")
	_ = os.WriteFile(path, data, 0o600)
	return shares(p) + " (profile: " + path + ")"
}

// categories sort a CPU sample by the first of them, in this order, whose
// functions are on its stack.
var categories = []struct {
	name  string
	match func(fn string) bool
}{
	{"binding", func(fn string) bool { return strings.HasPrefix(fn, "main.") }},
	{"patch", func(fn string) bool { return strings.Contains(fn, "admit.(*objects).patch") }},
	{"decode", func(fn string) bool {
		return strings.Contains(fn, "admit.(*objects).decode") || strings.Contains(fn, "admit.DecodeReview") || strings.Contains(fn, "admit.metaOnce")
	}},
	{"encode", func(fn string) bool {
		return strings.Contains(fn, "go-json.Marshal") || strings.Contains(fn, "encoding/json.Marshal")
	}},
	{"metrics", func(fn string) bool { return strings.Contains(fn, "prometheus") }},
	{"tls", func(fn string) bool { return strings.HasPrefix(fn, "crypto/") }},
	{"handler (rest)", func(fn string) bool { return strings.Contains(fn, "vigil/internal/serving/admit.") }},
	{"limits (body read)", func(fn string) bool { return strings.Contains(fn, "vigil/internal/serving/webhook.") }},
	{"http", func(fn string) bool { return strings.HasPrefix(fn, "net/http.") || strings.HasPrefix(fn, "bufio.") }},
	{"gc", func(fn string) bool {
		return strings.HasPrefix(fn, "runtime.gcBgMarkWorker") || strings.HasPrefix(fn, "runtime.bgsweep") || strings.HasPrefix(fn, "runtime.bgscavenge")
	}},
	{"network (syscalls)", func(fn string) bool {
		return strings.HasPrefix(fn, "internal/poll.") || strings.HasPrefix(fn, "syscall.") || strings.HasPrefix(fn, "runtime.netpoll")
	}},
	{"runtime (scheduler, other)", func(string) bool { return true }},
}

func shares(p *profile.Profile) string {
	by := map[string]int64{}
	var total int64
	for _, s := range p.Sample {
		v := s.Value[len(s.Value)-1]
		total += v
		name := ""
		for _, c := range categories {
			for _, loc := range s.Location {
				for _, line := range loc.Line {
					if line.Function != nil && c.match(line.Function.Name) {
						name = c.name
						break
					}
				}
				if name != "" {
					break
				}
			}
			if name != "" {
				break
			}
		}
		by[name] += v
	}
	var out []string
	for _, c := range categories {
		if by[c.name] > 0 {
			out = append(out, fmt.Sprintf("%s=%.0f%%", c.name, 100*float64(by[c.name])/float64(max(total, 1))))
		}
	}
	return strings.Join(out, " ")
}

// The load and floor machinery is the kit's (vigiltest), which
// bench-uds shares.
type loadResult = bench.LoadResult

func load(b *testing.B, pid int, target, url string, client *http.Client, payload string, body []byte, c int, d time.Duration) loadResult {
	return bench.Load(b, pid, target, url, client, payload, body, c, d)
}

func startFloor(b *testing.B, l *labeler) *bench.Floor { return bench.StartFloor(b, l.certDir) }

func ratio(r, floor loadResult) float64 { return r.Ratio(floor) }

func pct(sorted []time.Duration, p int) time.Duration { return bench.Percentile(sorted, p) }

func ms(d time.Duration) float64 { return bench.Ms(d) }

func us(d time.Duration) float64 { return bench.Us(d) }
