package bench

import (
	"bytes"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigilkit/vigil/vigiltest"
)

// The floor of the machine for an admission webhook, to measure a module
// against: a server that answers a review with a canned patch and decodes
// nothing (see StartFloor), and Load, which loads a server and reads its
// CPU. The floor server is the test binary run again with these set: a
// package's TestMain calls FloorMain first.
const (
	FloorAddrEnv  = "VIGIL_BENCH_FLOOR_ADDR"
	FloorCertsEnv = "VIGIL_BENCH_FLOOR_CERTS"
)

// FloorMain serves the floor and never returns when this process is the
// floor server StartFloor started; otherwise it returns at once. Call it
// first in TestMain.
func FloorMain() {
	if addr := os.Getenv(FloorAddrEnv); addr != "" {
		os.Exit(serveFloor(addr, os.Getenv(FloorCertsEnv)))
	}
}

// serveFloor is the floor of this machine for an admission webhook: a Go
// HTTPS server that reads the review, finds its uid by a byte search and
// answers a canned patch — no JSON decoded, no binding run. It serves until
// killed, with the serving certificate in certDir (tls.crt, tls.key).
func serveFloor(addr, certDir string) int {
	pair, err := tls.LoadX509KeyPair(filepath.Join(certDir, "tls.crt"), filepath.Join(certDir, "tls.key"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		return 1
	}
	patch := base64.StdEncoding.EncodeToString([]byte(`[{"op":"add","path":"/metadata/labels/vigil.dev~1labeled","value":"true"}]`))
	head := []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"`)
	tail := []byte(`","allowed":true,"patchType":"JSONPatch","patch":"` + patch + `"}}`)
	// Validations answer without a patch: the API server refuses one.
	validateTail := []byte(`","allowed":true}}`)
	key := []byte(`"uid":"`)
	var conns atomic.Int64
	srv := &http.Server{
		Addr: addr,
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				conns.Add(1)
			}
		},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/connections" { // how many it accepted
				_, _ = fmt.Fprint(w, conns.Load())
				return
			}
			body, err := io.ReadAll(r.Body)
			i := bytes.Index(body, key)
			if err != nil || i < 0 {
				http.Error(w, "no uid", http.StatusBadRequest)
				return
			}
			uid := body[i+len(key):]
			uid = uid[:max(0, bytes.IndexByte(uid, '"'))]
			end := tail
			if strings.HasPrefix(r.URL.Path, "/validate") {
				end = validateTail
			}
			out := make([]byte, 0, len(head)+len(uid)+len(end))
			out = append(append(append(out, head...), uid...), end...)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(out)
		}),
		ReadHeaderTimeout: 5 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0), // the probe that it listens fails a handshake
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12},
	}
	if err := srv.ListenAndServeTLS("", ""); err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		return 1
	}
	return 0
}

// Floor is a running floor server.
type Floor struct {
	Cmd *exec.Cmd
	// Base is its https://127.0.0.1:PORT.
	Base string
}

// Connections is how many connections the floor server has accepted,
// asked with client (which trusts its certificate).
func (f *Floor) Connections(client *http.Client) int {
	resp, err := client.Get(f.Base + "/connections")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	n, _ := strconv.Atoi(string(data))
	return n - 1 // not this one
}

// Stop kills the floor server.
func (f *Floor) Stop() { _ = f.Cmd.Process.Kill(); _, _ = f.Cmd.Process.Wait() }

// StartFloor runs the test binary again as a floor server (see FloorMain)
// with the serving certificate in certDir, and waits until it listens.
func StartFloor(t testing.TB, certDir string) *Floor {
	t.Helper()
	addr := vigiltest.FreeAddr(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), FloorAddrEnv+"="+addr, FloorCertsEnv+"="+certDir)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	f := &Floor{Cmd: cmd, Base: "https://" + addr}
	for began := time.Now(); ; time.Sleep(5 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return f
		}
		if time.Since(began) > 10*time.Second {
			t.Fatalf("floor server not listening on %s within 10s", addr)
		}
	}
}

// LoadResult is what Load measured.
type LoadResult struct {
	Payload     string
	Target      string
	Concurrency int
	Requests    int64
	RPS         float64
	P50, P99    time.Duration
	CPUPerReq   time.Duration
	Latencies   []time.Duration // sorted
}

// Ratio is r's CPU per request over floor's; 0 without a floor figure.
func (r LoadResult) Ratio(floor LoadResult) float64 {
	if floor.CPUPerReq == 0 {
		return 0
	}
	return float64(r.CPUPerReq) / float64(floor.CPUPerReq)
}

// Load sends body to url from c workers for d, and measures each request
// and the CPU the server process pid spent.
func Load(t testing.TB, pid int, target, url string, client *http.Client, payload string, body []byte, c int, d time.Duration) LoadResult {
	// Warm the connections.
	for range c {
		resp, err := client.Post(url, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	cpuBefore := ProcCPU(pid)
	var total atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	began := time.Now()
	stop := began.Add(d)
	var wg sync.WaitGroup
	for range c {
		wg.Go(func() {
			mine := make([]time.Duration, 0, 4096)
			for time.Now().Before(stop) {
				t0 := time.Now()
				resp, err := client.Post(url, "application/json", bytes.NewReader(body))
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Errorf("%s: status %d", target, resp.StatusCode)
					return
				}
				mine = append(mine, time.Since(t0))
				total.Add(1)
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(began)
	cpu := ProcCPU(pid) - cpuBefore
	slices.Sort(lat)
	n := total.Load()
	return LoadResult{
		Payload: payload, Target: target, Concurrency: c, Requests: n, RPS: float64(n) / elapsed.Seconds(),
		P50: Percentile(lat, 50), P99: Percentile(lat, 99), CPUPerReq: cpu / time.Duration(max(n, 1)), Latencies: lat,
	}
}

// ProcCPU is the process's user and system CPU time from /proc.
func ProcCPU(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses.
	fields := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+2:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	const ticksPerSecond = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / ticksPerSecond
}
