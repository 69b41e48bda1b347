package warming

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// server answers 429 as a warming watch cache does (or with another
// message) for the first n requests, then 200.
func server(t *testing.T, n int32, msg string) (*httptest.Server, *atomic.Int32) {
	var seen atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if seen.Add(1) <= n {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = io.WriteString(w, `{"kind":"Status","message":"`+msg+`","reason":"TooManyRequests","code":429}`)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	return srv, &seen
}

func TestRetriesAWarmingCacheWithinTheRetryAfter(t *testing.T) {
	srv, seen := server(t, 3, "storage is (re)initializing")
	var slept []time.Duration
	c := &http.Client{Transport: &transport{next: http.DefaultTransport, sleep: func(_ *http.Request, d time.Duration) bool {
		slept = append(slept, d)
		return true
	}}}
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "ok" || seen.Load() != 4 {
		t.Fatalf("expected 200 ok after 4 requests, got %d %q after %d", resp.StatusCode, body, seen.Load())
	}
	if len(slept) != 3 || slept[0] != 5*time.Millisecond || slept[1] != 10*time.Millisecond || slept[2] != 20*time.Millisecond {
		t.Fatalf("expected waits of 5, 10 and 20ms, got %v", slept)
	}
}

func TestHandsOnOther429sAndWrites(t *testing.T) {
	srv, seen := server(t, 1, "too many requests, slow down")
	c := &http.Client{Transport: Transport(http.DefaultTransport)}
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 429 || !strings.Contains(string(body), "slow down") || seen.Load() != 1 {
		t.Fatalf("expected the 429 handed on, body intact, after one request; got %d %q after %d", resp.StatusCode, body, seen.Load())
	}

	srv, seen = server(t, 1, "storage is (re)initializing")
	resp, err = c.Post(srv.URL, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 429 || seen.Load() != 1 {
		t.Fatalf("expected a write's 429 handed on after one request, got %d after %d", resp.StatusCode, seen.Load())
	}
}

func TestGivesUpAtTheRetryAfter(t *testing.T) {
	srv, seen := server(t, 1000, "storage is (re)initializing")
	c := &http.Client{Transport: Transport(http.DefaultTransport)}
	began := time.Now()
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 429 || !strings.Contains(string(body), "(re)initializing") {
		t.Fatalf("expected the 429 handed on once the Retry-After passed, got %d %q", resp.StatusCode, body)
	}
	if took := time.Since(began); took < time.Second || seen.Load() < 5 {
		t.Fatalf("expected retries for the Retry-After's second, got %d in %s", seen.Load(), took)
	}
}
