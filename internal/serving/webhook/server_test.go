package webhook_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	"github.com/vigilkit/vigil/internal/serving/certs"
	"github.com/vigilkit/vigil/internal/serving/webhook"
	"github.com/vigilkit/vigil/vigiltest"
)

func certDir(t testing.TB) (string, *certs.CA) {
	t.Helper()
	ca, err := certs.NewCA("ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ca.Issue([]string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), s.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), s.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, ca
}

func get(c *http.Client, url string) (int, string, error) {
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// On stop the server says it is not ready but keeps serving for the delay,
// finishes the requests in flight, and only then closes.
func TestGracefulStop(t *testing.T) {
	dir, ca := certDir(t)
	ctx, cancel := context.WithCancel(t.Context())
	addr := make(chan string, 1)
	slow := make(chan struct{})
	var ready error = errors.New("gates not handed over")
	served := make(chan error, 1)
	go func() {
		served <- webhook.Serve(ctx, webhook.Options{
			Addr: "127.0.0.1:0", CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key"),
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/slow" {
					close(slow)
					time.Sleep(800 * time.Millisecond)
				}
				_, _ = w.Write([]byte("admitted"))
			}),
			Ready:         func() error { return ready },
			ShutdownDelay: 600 * time.Millisecond,
			Listening:     func(a string) { addr <- a },
			Log:           logr.Discard(),
		})
	}()
	base := "https://" + <-addr
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}}}

	if code, body, err := get(c, base+"/readyz"); err != nil || code != 503 || !strings.Contains(body, "gates not handed over") {
		t.Fatalf("readyz before ready: %d %q %v", code, body, err)
	}
	ready = nil
	if code, _, err := get(c, base+"/readyz"); err != nil || code != 200 {
		t.Fatalf("readyz when ready: %d %v", code, err)
	}
	if code, _, err := get(c, base+"/healthz"); err != nil || code != 200 {
		t.Fatalf("healthz: %d %v", code, err)
	}
	// TLS 1.1 is refused.
	old := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), MaxVersion: tls.VersionTLS11}}}
	if _, _, err := get(old, base+"/healthz"); err == nil {
		t.Fatal("a TLS 1.1 client was served")
	}

	inflight := make(chan error, 1)
	go func() {
		code, body, err := get(c, base+"/slow")
		if err == nil && (code != 200 || body != "admitted") {
			err = errors.New("in-flight request answered " + body)
		}
		inflight <- err
	}()
	<-slow
	cancel()
	vigiltest.Eventually(t, 100*time.Millisecond, func() error {
		if code, body, err := get(c, base+"/readyz"); err != nil || code != 503 || !strings.Contains(body, "stopping") {
			return fmt.Errorf("readyz while stopping: %d %q %v", code, body, err)
		}
		return nil
	})
	// A review during the delay is answered, and its connection closed
	// after the answer (Connection: close) rather than left idle for the
	// drain to close under a client that may be sending on it.
	resp, err := c.Get(base + "/mutate/x")
	if err != nil {
		t.Fatalf("a request during the shutdown delay: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "admitted" || !resp.Close {
		t.Fatalf("a request during the shutdown delay: %d %q, Connection: close %v; want 200 \"admitted\" and the connection closed after it", resp.StatusCode, body, resp.Close)
	}
	if err := <-inflight; err != nil {
		t.Fatalf("the request in flight at stop: %v", err)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the server did not stop")
	}
}

// A request answered at its deadline whose handler still runs (a binding
// that ignores its context) does not hold the stop: once such requests are
// all that is left, their connections are closed.
func TestStopDoesNotWaitForRequestsAnsweredAlready(t *testing.T) {
	dir, ca := certDir(t)
	ctx, cancel := context.WithCancel(t.Context())
	addr := make(chan string, 1)
	release := make(chan struct{})
	defer close(release)
	var lingering atomic.Int64
	served := make(chan error, 1)
	go func() {
		served <- webhook.Serve(ctx, webhook.Options{
			Addr: "127.0.0.1:0", CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key"),
			Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Length", "8")
				w.Header().Set("Connection", "close")
				_, _ = w.Write([]byte("answered"))
				_ = http.NewResponseController(w).Flush()
				lingering.Add(1)
				defer lingering.Add(-1)
				<-release // the binding, still running
			}),
			Lingering: func() int { return int(lingering.Load()) },
			Listening: func(a string) { addr <- a },
			Log:       logr.Discard(),
		})
	}()
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}}}
	if code, body, err := get(c, "https://"+<-addr+"/mutate/x"); err != nil || code != 200 || body != "answered" {
		t.Fatalf("answer: %d %q %v", code, body, err)
	}
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the server still drained 3s after it was told to stop, waiting for a request it had answered (the drain timeout is 20s)")
	}
}

// A shutdown delay of zero is none: the server stops at once, rather than
// taking zero for unset and waiting 5s.
func TestZeroShutdownDelayStopsAtOnce(t *testing.T) {
	dir, _ := certDir(t)
	ctx, cancel := context.WithCancel(t.Context())
	var mu sync.Mutex
	var delays []string
	log := funcr.New(func(_, args string) {
		mu.Lock()
		defer mu.Unlock()
		delays = append(delays, args)
	}, funcr.Options{})
	served := make(chan error, 1)
	go func() {
		served <- webhook.Serve(ctx, webhook.Options{
			Addr: "127.0.0.1:0", CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key"),
			Handler: http.NotFoundHandler(), Listening: func(string) { cancel() }, Log: log,
		})
	}()
	select {
	case err := <-served:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the server with no shutdown delay still served 3s after it was told to stop")
	}
	mu.Lock()
	defer mu.Unlock()
	if all := strings.Join(delays, "\n"); !strings.Contains(all, `"for"="0s"`) {
		t.Fatalf("log %s: want the stop logged with for=0s", all)
	}
}

func TestServeNeedsACertificate(t *testing.T) {
	err := webhook.Serve(t.Context(), webhook.Options{Addr: "127.0.0.1:0", Handler: http.NotFoundHandler()})
	if err == nil || !strings.Contains(err.Error(), "set --cert-dir") {
		t.Fatalf("err = %v, want it to say how to give a certificate", err)
	}
}

// The server speaks HTTP/1.1 alone, also to a client that offers HTTP/2 as
// the API server's does (see Serve).
func TestServesHTTP1Only(t *testing.T) {
	s := serveWith(t, webhook.Limits{}, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	resp, err := s.client.Post(s.base+"/validate/x", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 1 || resp.TLS == nil || resp.TLS.NegotiatedProtocol == "h2" {
		t.Fatalf("expected HTTP/1.1 to a client offering h2, got %s (ALPN %q)", resp.Proto, resp.TLS.NegotiatedProtocol)
	}
}

// Accepted counts the connections the server keeps, each a TLS handshake:
// one for a client that keeps its connection alive, one a request for a
// client that does not, none for a connection refused at accept.
func TestAcceptedCountsConnections(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	var accepted atomic.Int32
	s := serveWith(t, webhook.Limits{Accepted: func() { accepted.Add(1) }}, ok)
	post := func(c *http.Client) {
		t.Helper()
		resp, err := c.Post(s.base+"/validate/x", "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	for range 5 {
		post(s.client)
	}
	if n := accepted.Load(); n != 1 {
		t.Errorf("5 requests over one kept-alive connection: %d connections accepted; want 1", n)
	}
	once := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: s.tlsConfig, DisableKeepAlives: true}}
	for range 3 {
		post(once)
	}
	if n := accepted.Load(); n != 4 {
		t.Errorf("then 3 requests each on its own connection: %d connections accepted in all; want 4", n)
	}

	// One connection held open fills its address's share: a second is
	// refused at accept, and not counted.
	var kept atomic.Int32
	one := serveWith(t, webhook.Limits{MaxConnsPerSource: 1, Accepted: func() { kept.Add(1) }}, ok)
	addr := strings.TrimPrefix(one.base, "https://")
	c, err := tls.Dial("tcp", addr, one.tlsConfig)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c, err := tls.Dial("tcp", addr, one.tlsConfig); err == nil {
		c.Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	for one.refused()["per_source"] < 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if r := one.refused(); r["per_source"] < 1 {
		t.Fatalf("refused %v: want the second connection refused per_source", r)
	}
	if n := kept.Load(); n != 1 {
		t.Errorf("one connection held and one refused: %d accepted; want 1", n)
	}
}
