package labeler

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/vigilkit/vigil/internal/testsupport/bench"
	"github.com/vigilkit/vigil/vigiltest"
)

// TestBoundedUnderAbuse drives, for 25 seconds, what took the admission
// server past its memory limit before it had limits — all on loopback, from
// a bounded number of connections, from 127.0.0.2 —
//   - 200 TLS connections that send a review's headers, then its body one
//     byte every 5 s (reconnecting when cut off);
//   - 30 connections that each send 6.5 MB of a 7 MB body, then trickle;
//   - 12 workers sending 6.9 MiB reviews back to back;
//
// at the labeler's admission role running with the Deployment's GOMEMLIMIT,
// while one worker sends ordinary reviews from 127.0.0.1, as the API server
// would from its own address. Its
// resident memory must stay under the Deployment's limit (256Mi), every
// ordinary review must be answered within the webhook's timeout (10s), and
// no trickling connection may stay open past the server's bounds.
func TestBoundedUnderAbuse(t *testing.T) {
	if testing.Short() {
		t.Skip("25 seconds of abuse")
	}
	limitBytes, goMemLimit := admissionMemory(t)
	l := startLabeler(t, "GOMEMLIMIT="+goMemLimit)
	pid := l.cmd.Process.Pid
	host := strings.TrimPrefix(l.base, "https://")
	// Each client its own copy: an HTTP/2 transport adds "h2" to its
	// config's NextProtos, and the tricklers speak HTTP/1.1.
	tlsConfig := func(protos ...string) *tls.Config {
		c := l.client.Transport.(*http.Transport).TLSClientConfig.Clone()
		c.NextProtos = protos
		return c
	}
	// The abuse comes from another client than the API server's reviews,
	// as a flooding Pod does: 127.0.0.2, which Linux routes to loopback.
	abuser := func() *net.Dialer {
		return &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	}
	const window = 25 * time.Second
	ctx, cancel := context.WithTimeout(t.Context(), window)
	defer cancel()

	var peakRSS atomic.Int64
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for ctx.Err() == nil {
			peakRSS.Store(max(peakRSS.Load(), bench.ProcStatus(pid, "VmRSS")))
			time.Sleep(100 * time.Millisecond)
		}
	}()

	var wg sync.WaitGroup
	// The tricklers: each connection's life, from dial to the server's close.
	var largeCodes sync.Map // status → *atomic.Int64
	count := func(m *sync.Map, k int) {
		v, _ := m.LoadOrStore(k, &atomic.Int64{})
		v.(*atomic.Int64).Add(1)
	}
	var tmu sync.Mutex
	var lives []time.Duration
	var stillOpen []time.Duration // open at the end of the window: how long
	trickle := func(prefix int, contentLength int) {
		defer wg.Done()
		for ctx.Err() == nil {
			c, err := tls.DialWithDialer(abuser(), "tcp", host, tlsConfig("http/1.1"))
			if err != nil {
				time.Sleep(200 * time.Millisecond)
				continue
			}
			began := time.Now()
			closed := make(chan struct{})
			go func() {
				_, _ = io.Copy(io.Discard, c)
				close(closed)
			}()
			_ = c.SetWriteDeadline(time.Now().Add(window))
			fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", validatePath, host, contentLength)
			if prefix > 0 {
				_, _ = c.Write(bytes.Repeat([]byte(" "), prefix))
			}
			ended := false
			for !ended {
				select {
				case <-closed:
					ended = true
					tmu.Lock()
					lives = append(lives, time.Since(began))
					tmu.Unlock()
				case <-ctx.Done():
					ended = true
					tmu.Lock()
					stillOpen = append(stillOpen, time.Since(began))
					tmu.Unlock()
				case <-time.After(5 * time.Second):
					_, _ = c.Write([]byte(" "))
				}
			}
			c.Close()
			time.Sleep(100 * time.Millisecond) // then again, as a client that retries
		}
	}
	for range 200 {
		wg.Add(1)
		go trickle(0, 4096)
	}
	for range 30 {
		wg.Add(1)
		go trickle(6_500_000, 7_000_000)
	}

	// The large reviews: a ConfigMap of 6.9 MiB, created.
	large := reviewOf(t, &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "large", Namespace: "apps", Labels: map[string]string{"app": "bench"}},
		Data:       map[string]string{"blob": strings.Repeat("x", 69<<20/10)},
	}, "configmaps")
	bigClient := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig(), ForceAttemptHTTP2: true, DialContext: abuser().DialContext}}
	for range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, "POST", l.base+validatePath, bytes.NewReader(large))
				req.Header.Set("Content-Type", "application/json")
				resp, err := bigClient.Do(req)
				if err != nil {
					count(&largeCodes, 0)
					time.Sleep(50 * time.Millisecond)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				count(&largeCodes, resp.StatusCode)
				if resp.StatusCode != 200 {
					time.Sleep(20 * time.Millisecond) // then again, as a client that retries
				}
			}
		}()
	}

	// Ordinary reviews, as the API server sends them: offering HTTP/2 (the
	// server answers in HTTP/1.1), the webhook's timeout of 10 s.
	ordinary := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig(), ForceAttemptHTTP2: true}}
	small := configMapReview(t, 0)
	var lat []time.Duration
	var failures []string
	time.Sleep(2 * time.Second) // let the abuse build up
	for ctx.Err() == nil {
		t0 := time.Now()
		resp, err := ordinary.Post(l.base+mutatePath, "application/json", bytes.NewReader(small))
		if err != nil {
			failures = append(failures, err.Error())
			time.Sleep(50 * time.Millisecond)
			continue
		}
		out := &admissionv1.AdmissionReview{}
		derr := json.NewDecoder(resp.Body).Decode(out)
		resp.Body.Close()
		if resp.StatusCode != 200 || derr != nil || out.Response == nil || !out.Response.Allowed {
			failures = append(failures, fmt.Sprintf("status %d, %v", resp.StatusCode, derr))
			time.Sleep(50 * time.Millisecond)
			continue
		}
		lat = append(lat, time.Since(t0))
		time.Sleep(50 * time.Millisecond)
	}
	wg.Wait()
	<-sampled
	hwm := bench.ProcStatus(pid, "VmHWM")

	slices.Sort(lat)
	slices.Sort(lives)
	var codes []string
	largeCodes.Range(func(k, v any) bool {
		codes = append(codes, fmt.Sprintf("%v:%d", k, v.(*atomic.Int64).Load()))
		return true
	})
	slices.Sort(codes)
	t.Logf("abuse for %s: peak RSS %.1f MiB (VmHWM %.1f MiB) against a limit of %.0f MiB, GOMEMLIMIT %s",
		window, float64(peakRSS.Load())/1024, float64(hwm)/1024, float64(limitBytes)/(1<<20), goMemLimit)
	t.Logf("ordinary reviews: %d answered, %d failed; p50 %s, p99 %s, max %s", len(lat), len(failures), pct(lat, 50), pct(lat, 99), pct(lat, 100))
	t.Logf("trickling connections: %d cut off by the server, longest %s; %d open at the end, longest %s", len(lives), pct(lives, 100), len(stillOpen), slices.Max(append(stillOpen, 0)))
	t.Logf("6.9 MiB reviews by status (0: transport error): %s", strings.Join(codes, " "))
	t.Logf("refused by the server's limits:\n%s", refusedMetrics(t, l.metrics))

	if hwm*1024 >= limitBytes {
		t.Errorf("resident memory peaked at %d KiB, over the Deployment's limit of %d bytes", hwm, limitBytes)
	}
	if len(failures) > 0 || len(lat) == 0 {
		t.Errorf("ordinary reviews failed (%d answered): %v", len(lat), failures)
	}
	if len(lat) > 0 && lat[len(lat)-1] >= 10*time.Second {
		t.Errorf("an ordinary review took %s, past the webhook's timeout", lat[len(lat)-1])
	}
	// The server's bounds: headers in 5s, a body in 10s, 15s in all.
	const bound = 20 * time.Second
	if len(lives) == 0 {
		t.Error("the server cut off no trickling connection")
	} else if lives[len(lives)-1] > bound {
		t.Errorf("a trickling connection stayed open %s", lives[len(lives)-1])
	}
	for _, d := range stillOpen {
		if d > bound {
			t.Errorf("a trickling connection was still open after %s", d)
		}
	}
}

// refusedMetrics reads vigil_admission_refused_total from the metrics port.
func refusedMetrics(t *testing.T, base string) string {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Errorf("read metrics: %v", err)
		return ""
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "vigil_admission_refused_total") {
			out = append(out, line)
		}
	}
	if len(out) == 0 {
		t.Error("no vigil_admission_refused_total on the metrics port")
	}
	return strings.Join(out, "\n")
}

// admissionMemory is the memory limit, in bytes, and the GOMEMLIMIT of the
// admission container in the labeler's own manifests: what it runs with in a
// cluster.
func admissionMemory(t *testing.T) (limitBytes int64, goMemLimit string) {
	t.Helper()
	bin := vigiltest.BuildModule(t, labelerDir)
	out, err := exec.Command(bin, "manifests", "--image", "example.com/labeler:test").Output()
	if err != nil {
		t.Fatalf("labeler manifests: %v", err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		var d appsv1.Deployment
		if err := dec.Decode(&d); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("decode the labeler's manifests: %v", err)
		}
		if d.Kind != "Deployment" {
			continue
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			if c.Name != "admission" {
				continue
			}
			for _, e := range c.Env {
				if e.Name == "GOMEMLIMIT" {
					goMemLimit = e.Value
				}
			}
			limitBytes = c.Resources.Limits.Memory().Value()
			if goMemLimit == "" || limitBytes == 0 {
				t.Fatalf("the admission container of the labeler's manifests has memory limit %d and GOMEMLIMIT %q", limitBytes, goMemLimit)
			}
			return limitBytes, goMemLimit
		}
	}
	t.Fatal("the labeler's manifests have no admission container")
	return 0, ""
}
