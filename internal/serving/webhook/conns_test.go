package webhook_test

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigilkit/vigil/internal/serving/webhook"
	"github.com/vigilkit/vigil/internal/testsupport/bench"
	"github.com/vigilkit/vigil/vigiltest"
)

// floodTLS is the flood's TLS: it does not care whom it floods.
var floodTLS = &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}} //nolint:gosec // a flood

// fromLocalhost sends one request on a connection of its own from
// 127.0.0.1, as the API server does after the flood took the others, and
// says how long it took.
func (s *served) fromLocalhost(t *testing.T, url string) (time.Duration, error) {
	t.Helper()
	tr := &http.Transport{TLSClientConfig: s.tlsConfig.Clone(), DisableKeepAlives: true,
		DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}, Timeout: 5 * time.Second}).DialContext}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	began := time.Now()
	code, _, err := get(c, url)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("status %d", code)
	}
	return time.Since(began), err
}

// A flood from one source — silent connections and idle keep-alive ones,
// more than MaxConns, redialled as the server closes them — takes no more
// than its share, and a client from another address is still served at
// once. With one limit for all (before), the flood held every slot and
// the client's connections were closed at accept.
func TestFloodFromOneSourceLeavesOthersServed(t *testing.T) {
	// MaxConns 64 rather than 512, to keep the flood's TLS within two
	// shared cores under the race detector; test/labeler floods the
	// defaults through the API server.
	const maxConns, share = 64, 32
	s := serveWith(t, webhook.Limits{MaxConns: maxConns}, echo)
	host := strings.TrimPrefix(s.base, "https://")
	const n = 100 // of each kind: 200 connections against MaxConns 64
	f := bench.Flood(t, bench.FloodOptions{Addr: host, Silent: n, Idle: n, TLS: floodTLS, Redial: 200 * time.Millisecond})
	f.WaitTried(t, 60*time.Second)
	t.Log(f)
	var took []time.Duration
	for i := range 20 {
		d, err := s.fromLocalhost(t, s.base+"/healthz")
		if err != nil {
			t.Fatalf("request %d from 127.0.0.1 during the flood (%s): %v", i, f, err)
		}
		took = append(took, d)
	}
	slices.Sort(took)
	t.Logf("20 requests from 127.0.0.1, each on a new connection, during the flood: p50 %s, slowest %s; %s; refused %v", took[10], took[19], f, s.refused())
	// Well within the API server's webhook timeout (10s at most), on two
	// cores shared with the flood's 1,200 connections and their TLS.
	if took[19] > 5*time.Second {
		t.Errorf("a request from 127.0.0.1 took %s during the flood: want each within 5s", took[19])
	}
	vigiltest.Eventually(t, 10*time.Second, func() error {
		if open := f.Open(); open > share {
			return fmt.Errorf("the flood holds %d connections: want at most MaxConnsPerSource, %d (half of MaxConns)", open, share)
		}
		return nil
	})
	if r := s.refused(); r["per_source"] == 0 {
		t.Errorf("refused %v: want the flood's connections beyond its share counted per_source", r)
	}
}

// With every slot taken by idle connections from several sources, a new
// connection evicts the oldest idle one of the source holding the most,
// instead of being closed.
func TestIdleConnectionsMakeRoom(t *testing.T) {
	s := serveWith(t, webhook.Limits{MaxConns: 4, MaxConnsPerSource: 3}, echo)
	host := strings.TrimPrefix(s.base, "https://")
	big := bench.Flood(t, bench.FloodOptions{Addr: host, Source: "127.0.0.2", Idle: 3, TLS: floodTLS})
	big.WaitTried(t, 10*time.Second)
	small := bench.Flood(t, bench.FloodOptions{Addr: host, Source: "127.0.0.3", Idle: 1, TLS: floodTLS})
	small.WaitTried(t, 10*time.Second)
	if big.Open() != 3 || small.Open() != 1 {
		t.Fatalf("before: %s; %s: want all 4 open", big, small)
	}
	if d, err := s.fromLocalhost(t, s.base+"/healthz"); err != nil {
		t.Fatalf("a request from 127.0.0.1 with every slot idle: %v (%s)", err, d)
	}
	vigiltest.Eventually(t, 5*time.Second, func() error {
		if big.Open() != 2 || small.Open() != 1 {
			return fmt.Errorf("%s; %s: want one of 127.0.0.2's evicted, 127.0.0.3's kept", big, small)
		}
		return nil
	})
	if r := s.refused(); r["evicted_idle"] != 1 || r["connections"] != 0 {
		t.Errorf("refused %v: want one evicted_idle, no connection closed at accept", r)
	}
}

// A connection that sends no request within FirstRequestTimeout is closed,
// well before the header timeout.
func TestSilentConnectionsAreClosed(t *testing.T) {
	s := serveWith(t, webhook.Limits{FirstRequestTimeout: 300 * time.Millisecond, HeaderTimeout: 10 * time.Second}, echo)
	host := strings.TrimPrefix(s.base, "https://")
	began := time.Now()
	f := bench.Flood(t, bench.FloodOptions{Addr: host, Silent: 5})
	vigiltest.Eventually(t, 5*time.Second, func() error {
		if f.ServerClosed() != 5 {
			return fmt.Errorf("%s: want all 5 closed by the server", f)
		}
		return nil
	})
	took := time.Since(began)
	t.Logf("5 silent connections closed within %s", took)
	if took > 3*time.Second {
		t.Errorf("silent connections held %s: want them closed soon after FirstRequestTimeout (300ms)", took)
	}
	if r := s.refused(); r["silent"] != 5 {
		t.Errorf("refused %v: want 5 silent", r)
	}
}

// The metrics port has the webhook's connection limits, smaller: idle
// keep-alive connections from several sources stay bounded by its cap,
// and a scrape from another address is still served.
func TestMetricsConnectionsAreBounded(t *testing.T) {
	var mu sync.Mutex
	refused := map[string]int{}
	s := serveWith(t, webhook.Limits{}, echo, func(o *webhook.Options) {
		o.MetricsLimits.Refused = func(reason string) {
			mu.Lock()
			refused[reason]++
			mu.Unlock()
		}
	})
	host := strings.TrimPrefix(s.metrics, "http://")
	// 4 sources, 60 each: 240 against the cap, 16, and 4 per source.
	var floods []*bench.Flooder
	for i := 2; i <= 5; i++ {
		floods = append(floods, bench.Flood(t, bench.FloodOptions{Addr: host, Source: fmt.Sprintf("127.0.0.%d", i), Idle: 60, Path: "/metrics", Redial: 100 * time.Millisecond}))
	}
	for _, f := range floods {
		f.WaitTried(t, 30*time.Second)
	}
	open := func() (n int) {
		for _, f := range floods {
			n += f.Open()
		}
		return n
	}
	bounded := func() error {
		for _, f := range floods {
			if f.Open() > 4 {
				return fmt.Errorf("%s: want at most 4 per source", f)
			}
		}
		if n := open(); n > 16 {
			return fmt.Errorf("the floods hold %d metrics connections: want at most 16", n)
		}
		return nil
	}
	vigiltest.Eventually(t, 10*time.Second, bounded)
	vigiltest.Consistently(t, 2*time.Second, bounded)
	// Every slot is taken, by idle connections: a scrape from another
	// address evicts one.
	if d, err := s.fromLocalhost(t, s.metrics+"/metrics"); err != nil {
		t.Fatalf("a scrape from 127.0.0.1 during the flood: %v (%s)", err, d)
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("metrics floods: %d open; refused %v", open(), refused)
	if refused["per_source"] == 0 || refused["evicted_idle"] == 0 {
		t.Errorf("refused %v: want per_source, and evicted_idle for the scrape", refused)
	}
}

// Metrics connections kept idle are closed after the metrics' idle
// timeout, not the webhook's 90s.
func TestMetricsIdleTimeout(t *testing.T) {
	s := serveWith(t, webhook.Limits{}, echo, func(o *webhook.Options) { o.MetricsLimits.IdleTimeout = 500 * time.Millisecond })
	f := bench.Flood(t, bench.FloodOptions{Addr: strings.TrimPrefix(s.metrics, "http://"), Idle: 3, Path: "/metrics"})
	f.WaitTried(t, 10*time.Second)
	vigiltest.Eventually(t, 5*time.Second, func() error {
		if f.ServerClosed() != 3 {
			return fmt.Errorf("%s: want the 3 idle connections closed", f)
		}
		return nil
	})
}

// Trickling floods from 2, 3 and 8 sources — each at its per-source cap,
// together at or past MaxConns, every connection reading a request body a
// byte at a time (the bodies' least rate lowered here, so that they stay)
// — leave a client from another address served at once: below its fair
// share, its connection evicts one reading a body of the source holding
// the most. With half of MaxConns for each source and connections reading
// a body never evicted (before), two sources filled every slot and the
// client's connections were closed at accept.
func TestTrickleFloodsLeaveOthersServed(t *testing.T) {
	const maxConns, perSource = 64, 32
	s := serveWith(t, webhook.Limits{MaxConns: maxConns, BodyMinRate: 1, BodyTimeout: time.Minute}, echo)
	host := strings.TrimPrefix(s.base, "https://")
	for _, sources := range []int{2, 3, 8} {
		var floods []*bench.Flooder
		for i := range sources {
			floods = append(floods, bench.Flood(t, bench.FloodOptions{Addr: host, Source: fmt.Sprintf("127.0.0.%d", i+2),
				Trickle: perSource, TrickleEvery: 500 * time.Millisecond, TLS: floodTLS, Path: "/validate/x", Redial: 200 * time.Millisecond, For: 2 * time.Minute}))
		}
		open := func() (n int) {
			for _, f := range floods {
				n += f.Open()
			}
			return n
		}
		for _, f := range floods {
			f.WaitTried(t, 60*time.Second)
		}
		// Full: what the floods hold, and what the server refused them.
		vigiltest.Eventually(t, 30*time.Second, func() error {
			if n := open(); n < maxConns {
				return fmt.Errorf("the floods from %d sources hold %d connections: want the listener full, %d", sources, n, maxConns)
			}
			return nil
		})
		before := s.refused()["evicted_reading"]
		for i := range 10 {
			if d, err := s.fromLocalhost(t, s.base+"/healthz"); err != nil {
				t.Fatalf("request %d from 127.0.0.1 during the trickle floods from %d sources (%d connections open): %v (%s)", i, sources, open(), err, d)
			}
		}
		r := s.refused()
		t.Logf("%d sources, %d trickling connections each: 10 requests from 127.0.0.1 served; refused %v", sources, perSource, r)
		if r["evicted_reading"] == before {
			t.Errorf("refused %v: want connections reading a trickled body evicted_reading for 127.0.0.1's", r)
		}
		for _, f := range floods {
			f.Stop()
		}
	}
}

// A body trickled a byte at a time is cut once it falls behind the least
// rate (BodyMinRate, 256 KiB a second after a second's grace): about a
// second for 60,000 bytes, not BodyTimeout (10s), which bounded it before.
func TestTrickledBodiesAreCutAtTheLeastRate(t *testing.T) {
	s := serveWith(t, webhook.Limits{}, echo)
	host := strings.TrimPrefix(s.base, "https://")
	began := time.Now()
	f := bench.Flood(t, bench.FloodOptions{Addr: host, Trickle: 3, TrickleLength: 60000, TrickleEvery: 100 * time.Millisecond, TLS: floodTLS, Path: "/validate/x"})
	vigiltest.Eventually(t, 15*time.Second, func() error {
		if f.ServerClosed() != 3 {
			return fmt.Errorf("%s: want the 3 trickling requests cut", f)
		}
		return nil
	})
	took := time.Since(began)
	t.Logf("3 requests trickling a 60,000-byte body cut within %s", took)
	// Half of BodyTimeout: the cut is the rate's, not the timeout's.
	if took > 5*time.Second {
		t.Errorf("trickled bodies held their connections %s: want them cut at the least rate, well before BodyTimeout (10s)", took)
	}
	if r := s.refused(); r["body_timeout"] != 3 {
		t.Errorf("refused %v: want 3 body_timeout", r)
	}
}
