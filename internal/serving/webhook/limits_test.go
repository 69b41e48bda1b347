package webhook_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/vigilkit/vigil/internal/serving/webhook"
)

type served struct {
	base, metrics string
	client        *http.Client
	tlsConfig     *tls.Config
	refused       func() map[string]int
}

// serveWith starts a server with the limits and handler, and a client for it.
func serveWith(t testing.TB, limits webhook.Limits, h http.Handler, more ...func(*webhook.Options)) *served {
	t.Helper()
	dir, ca := certDir(t)
	var mu sync.Mutex
	refused := map[string]int{}
	limits.Refused = func(reason string) {
		mu.Lock()
		refused[reason]++
		mu.Unlock()
	}
	addr, metrics := make(chan string, 1), make(chan string, 1)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	opts := webhook.Options{
		Addr: "127.0.0.1:0", CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key"),
		Handler:          h,
		Metrics:          http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("metric 1\n")) }),
		MetricsAddr:      "127.0.0.1:0",
		MetricsListening: func(a string) { metrics <- a },
		Limits:           limits,
		ShutdownDelay:    time.Millisecond,
		Listening:        func(a string) { addr <- a },
		Log:              logr.Discard(),
	}
	for _, f := range more {
		f(&opts)
	}
	go func() { done <- webhook.Serve(ctx, opts) }()
	t.Cleanup(func() { cancel(); <-done })
	cfg := &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}
	s := &served{metrics: "http://" + <-metrics, base: "https://" + <-addr, tlsConfig: cfg,
		client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}},
		refused: func() map[string]int {
			mu.Lock()
			defer mu.Unlock()
			out := map[string]int{}
			for k, v := range refused {
				out[k] = v
			}
			return out
		}}
	return s
}

func (s *served) post(body io.Reader) (int, http.Header, string, error) {
	resp, err := s.client.Post(s.base+"/validate/x", "application/json", body)
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b), nil
}

// echo answers with the size of the body it was handed, read in full.
var echo = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	fmt.Fprintf(w, "%d", len(b))
})

// Requests beyond MaxInFlight are answered 429 at once, without
// Retry-After, while those in flight finish.
func TestExcessRequestsAreRefusedAtOnce(t *testing.T) {
	release := make(chan struct{})
	var inside atomic.Int32
	s := serveWith(t, webhook.Limits{MaxInFlight: 2}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inside.Add(1)
		<-release
		echo(w, r)
	}))
	results := make(chan int, 2)
	for range 2 {
		go func() {
			code, _, _, _ := s.post(strings.NewReader("{}"))
			results <- code
		}()
	}
	for inside.Load() < 2 {
		time.Sleep(time.Millisecond)
	}
	began := time.Now()
	code, header, body, err := s.post(strings.NewReader("{}"))
	if err != nil || code != http.StatusTooManyRequests || header.Get("Retry-After") != "" || !strings.Contains(body, "failure policy") {
		t.Fatalf("a third request: %d %v %q %v", code, header, body, err)
	}
	t.Logf("refused in %s", time.Since(began))
	close(release)
	for range 2 {
		if code := <-results; code != 200 {
			t.Fatalf("a request in flight answered %d", code)
		}
	}
	if s.refused()["in_flight"] != 1 {
		t.Fatalf("refused: %v", s.refused())
	}
}

// A body over MaxBodyBytes is refused, announced or not; one at the limit
// is served.
func TestBodyOverTheLimitIsRefused(t *testing.T) {
	s := serveWith(t, webhook.Limits{MaxBodyBytes: 1 << 20}, echo)
	if code, _, body, err := s.post(bytes.NewReader(make([]byte, 1<<20))); err != nil || code != 200 || body != fmt.Sprint(1<<20) {
		t.Fatalf("a body at the limit: %d %q %v", code, body, err)
	}
	if code, _, _, err := s.post(bytes.NewReader(make([]byte, 1<<20+1))); err != nil || code != http.StatusRequestEntityTooLarge {
		t.Fatalf("an announced body over the limit: %d %v", code, err)
	}
	// io.MultiReader hides the length: sent chunked.
	if code, _, _, err := s.post(io.MultiReader(bytes.NewReader(make([]byte, 1<<20+1)))); err != nil || code != http.StatusRequestEntityTooLarge {
		t.Fatalf("a chunked body over the limit: %d %v", code, err)
	}
	if s.refused()["too_large"] != 2 {
		t.Fatalf("refused: %v", s.refused())
	}
}

// A body announced over the limit is refused before any of it is read: the
// sender that announces 1 MiB and sends nothing gets 413, not the body
// timeout's 408.
func TestAnnouncedOversizeIsRefusedUnread(t *testing.T) {
	s := serveWith(t, webhook.Limits{MaxBodyBytes: 1 << 20, BodyTimeout: 3 * time.Second}, echo)
	pr, pw := io.Pipe()
	defer pw.Close()
	req, err := http.NewRequest(http.MethodPost, s.base+"/", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = 1<<20 + 1
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("a body announced over the limit and never sent: %d, want 413 at once", resp.StatusCode)
	}
}

// Large bodies share the budget; small ones are read from their allowance
// and are served while the budget is taken.
func TestBodyBudgetLeavesSmallRequestsServed(t *testing.T) {
	release := make(chan struct{})
	var held atomic.Int32
	s := serveWith(t, webhook.Limits{MaxBodyBytes: 4 << 20, BodyBudget: 4 << 20, BodyAllowance: 64 << 10}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > 1<<20 {
			held.Add(1)
			<-release
		}
		echo(w, r)
	}))
	first := make(chan int, 1)
	go func() {
		code, _, _, _ := s.post(bytes.NewReader(make([]byte, 3<<20)))
		first <- code
	}()
	for held.Load() < 1 {
		time.Sleep(time.Millisecond)
	}
	if code, _, _, err := s.post(bytes.NewReader(make([]byte, 3<<20))); err != nil || code != http.StatusTooManyRequests {
		t.Fatalf("a second large body while the budget is held: %d %v", code, err)
	}
	if code, _, body, err := s.post(bytes.NewReader(make([]byte, 8<<10))); err != nil || code != 200 || body != fmt.Sprint(8<<10) {
		t.Fatalf("a small body while the budget is held: %d %q %v", code, body, err)
	}
	close(release)
	if code := <-first; code != 200 {
		t.Fatalf("the first large body: %d", code)
	}
	if code, _, _, err := s.post(bytes.NewReader(make([]byte, 3<<20))); err != nil || code != 200 {
		t.Fatalf("a large body once the budget is back: %d %v", code, err)
	}
}

// A client that sends its headers or its body too slowly is cut off.
func TestSlowClientsAreCutOff(t *testing.T) {
	s := serveWith(t, webhook.Limits{HeaderTimeout: 300 * time.Millisecond, BodyTimeout: 500 * time.Millisecond}, echo)
	host := strings.TrimPrefix(s.base, "https://")

	// Headers, a byte at a time.
	c, err := tls.Dial("tcp", host, s.tlsConfig)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	began := time.Now()
	closed := make(chan time.Duration, 1)
	go func() {
		_, _ = io.Copy(io.Discard, c)
		closed <- time.Since(began)
	}()
	for _, b := range []byte("POST /validate/x HTTP/1.1\r\nHost: x\r\n") {
		if _, err := c.Write([]byte{b}); err != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
		if len(closed) > 0 {
			break
		}
	}
	select {
	case d := <-closed:
		t.Logf("a slow header closed after %s", d)
		if d > 2*time.Second {
			t.Fatalf("a slow header held its connection %s", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a slow header held its connection")
	}

	// A body, a byte at a time after the first.
	pr, pw := io.Pipe()
	go func() {
		_, _ = pw.Write([]byte("{"))
		for range 50 {
			time.Sleep(100 * time.Millisecond)
			if _, err := pw.Write([]byte(" ")); err != nil {
				return
			}
		}
		pw.Close()
	}()
	req, _ := http.NewRequest("POST", s.base+"/validate/x", pr)
	req.ContentLength = 1000
	began = time.Now()
	resp, err := s.client.Do(req)
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestTimeout {
			t.Fatalf("a slow body: %d", resp.StatusCode)
		}
	}
	pw.CloseWithError(io.ErrClosedPipe)
	if d := time.Since(began); d > 3*time.Second {
		t.Fatalf("a slow body held its request %s", d)
	}
	if s.refused()["body_timeout"] != 1 {
		t.Fatalf("refused: %v", s.refused())
	}
}

// Connections beyond MaxConns are closed as they are accepted while every
// open one is serving a request (idle ones are evicted instead: see
// TestIdleConnectionsMakeRoom).
func TestConnectionsBeyondTheLimitAreClosed(t *testing.T) {
	release := make(chan struct{})
	var inside atomic.Int32
	s := serveWith(t, webhook.Limits{MaxConns: 3, MaxConnsPerSource: 4}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inside.Add(1)
		<-release
		echo(w, r)
	}))
	host := strings.TrimPrefix(s.base, "https://")
	results := make(chan error, 3)
	for range 3 {
		go func() {
			code, _, _, err := s.post(strings.NewReader("{}"))
			if err == nil && code != 200 {
				err = fmt.Errorf("status %d", code)
			}
			results <- err
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for inside.Load() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 3 requests reached the handler within 10s", inside.Load())
		}
		time.Sleep(time.Millisecond)
	}
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", host, s.tlsConfig)
	if err == nil {
		c.Close()
		t.Fatal("a fourth connection was served while three served requests")
	}
	close(release)
	for range 3 {
		if err := <-results; err != nil {
			t.Fatalf("a request in flight: %v", err)
		}
	}
	// Once they are answered, requests are served again.
	if code, _, _, err := s.post(strings.NewReader("{}")); err != nil || code != 200 {
		t.Fatalf("a request once the others were answered: %d %v", code, err)
	}
	if s.refused()["connections"] < 1 {
		t.Fatalf("refused: %v", s.refused())
	}
}

// /metrics is served on its own address, not on the webhook's.
func TestMetricsOnTheirOwnPort(t *testing.T) {
	s := serveWith(t, webhook.Limits{}, echo)
	if code, body, err := get(http.DefaultClient, s.metrics+"/metrics"); err != nil || code != 200 || body != "metric 1\n" {
		t.Fatalf("metrics: %d %q %v", code, body, err)
	}
	if code, body, err := get(s.client, s.base+"/metrics"); err != nil || strings.Contains(body, "metric 1") {
		t.Fatalf("the webhook port serves metrics: %d %q %v", code, body, err)
	}
}
