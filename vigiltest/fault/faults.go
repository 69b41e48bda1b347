package fault

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// faults is what the proxy does to requests for now.
type faults struct {
	mu             sync.Mutex
	blackholeUntil time.Time
	throttleUntil  time.Time
	retryAfter     time.Duration
	expireUntil    time.Time
	// watches are the open watch responses, to end on ExpireWatches.
	watches map[*http.Request]context.CancelFunc
	// changed is closed and replaced when a blackhole ends early or starts.
	changed chan struct{}
	// holes are the open client connections, by the connection accepted,
	// for Stall; closed is set when the proxy closes.
	holes  map[net.Conn]*holeConn
	closed bool
}

// hole wraps a client connection accepted, for Blackhole and Stall.
func (f *faults) hole(c net.Conn) *holeConn {
	h := &holeConn{Conn: c, f: f}
	f.mu.Lock()
	f.holes[c] = h
	f.mu.Unlock()
	return h
}

// forget drops a client connection that ended.
func (f *faults) forget(c net.Conn) {
	f.mu.Lock()
	delete(f.holes, c)
	f.mu.Unlock()
}

// Stall makes every connection open now pass nothing, either way, for good,
// while new connections are served: a half-open connection, as a NAT or a
// load balancer leaves behind when it forgets a flow without telling either
// end. A watch on one hears nothing more and gets no error; only a client that
// notices the silence and connects again recovers. It returns the connections
// it stalled.
func (p *Proxy) Stall() int {
	p.f.mu.Lock()
	for _, h := range p.f.holes {
		h.stalled.Store(true)
	}
	n := len(p.f.holes)
	p.f.mu.Unlock()
	p.count(func(s *Stats) { s.Stalls++; s.Stalled += n })
	return n
}

// Blackhole makes every connection through the proxy, open or new, pass
// nothing either way for d, without a reset or a close: the TCP connections
// stay up, as behind a network that silently drops packets, and carry on
// afterwards. Only a client's own timeouts and health checks notice. It
// returns the connections it holds.
func (p *Proxy) Blackhole(d time.Duration) int {
	p.f.mu.Lock()
	p.f.blackholeUntil = time.Now().Add(d)
	close(p.f.changed)
	p.f.changed = make(chan struct{})
	p.f.mu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stats.Blackholes++
	return len(p.conns)
}

// Throttle answers every request 429 Too Many Requests with a Retry-After of
// retryAfter (in whole seconds, at least 1) for d, as an API server's
// priority and fairness does when its queues are full. client-go waits out
// Retry-After and retries, up to ten times.
func (p *Proxy) Throttle(d, retryAfter time.Duration) {
	p.f.mu.Lock()
	defer p.f.mu.Unlock()
	p.f.throttleUntil, p.f.retryAfter = time.Now().Add(d), retryAfter
}

// ExpireWatches ends every open watch and, for d, answers every new watch
// that resumes from a resourceVersion 410 Gone (reason Expired), as an API
// server does when that resourceVersion is older than its history:
// informers list again. A watch that starts with its initial events (a
// streamed list, sendInitialEvents=true) is passed on, as the API server
// serves one after a compaction too: client-go's informers relist through
// one where the server streams lists (Kubernetes 1.34 and later), and
// through a paged list where it does not.
func (p *Proxy) ExpireWatches(d time.Duration) {
	p.f.mu.Lock()
	p.f.expireUntil = time.Now().Add(d)
	for r, cancel := range p.f.watches {
		cancel()
		delete(p.f.watches, r)
	}
	p.f.mu.Unlock()
}

// Cut resets every open connection at once, as a crashed load balancer
// does, and keeps serving new ones. It returns the connections it cut.
func (p *Proxy) Cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cutLocked()
}

// intercept answers a request the proxy's faults decide, or returns false to
// pass it on; a watch passed on is tracked so that ExpireWatches ends it.
func (p *Proxy) intercept(w http.ResponseWriter, r *http.Request) (*http.Request, func(), bool) {
	now := time.Now()
	// The faults are read and a watch passed on is registered under one
	// lock: a watch must either meet a fault set now or be registered before
	// ExpireWatches looks, never slip between the two.
	p.f.mu.Lock()
	throttled, retryAfter := now.Before(p.f.throttleUntil), p.f.retryAfter
	expired := isWatch(r) && !streamsList(r) && now.Before(p.f.expireUntil)
	if !throttled && !expired && isWatch(r) {
		ctx, cancel := context.WithCancel(r.Context())
		r = r.WithContext(ctx)
		p.f.watches[r] = cancel
		p.f.mu.Unlock()
		return r, func() {
			p.f.mu.Lock()
			delete(p.f.watches, r)
			p.f.mu.Unlock()
			cancel()
		}, false
	}
	p.f.mu.Unlock()
	switch {
	case throttled:
		p.count(func(s *Stats) { s.Throttled++ })
		secs := int(math.Ceil(retryAfter.Seconds()))
		w.Header().Set("Retry-After", strconv.Itoa(max(1, secs)))
		writeStatus(w, http.StatusTooManyRequests, "TooManyRequests", "the fault proxy throttles: too many requests, please try again later")
		return nil, nil, true
	case expired:
		p.count(func(s *Stats) { s.Expired++ })
		writeStatus(w, http.StatusGone, "Expired", "the fault proxy expires watches: too old resource version")
		return nil, nil, true
	}
	return r, func() {}, false
}

func (p *Proxy) count(f func(*Stats)) {
	p.mu.Lock()
	f(&p.stats)
	p.mu.Unlock()
}

// writeStatus answers as the API server does: a metav1.Status.
func writeStatus(w http.ResponseWriter, code int, reason, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":%q,"reason":%q,"code":%d}`, message, reason, code)
}

// holeConn is a client connection that passes nothing while the proxy
// blackholes: what it reads is held until the blackhole ends, and what is
// written to it waits.
type holeConn struct {
	net.Conn
	f *faults
	// stalled holds the connection for good (Stall), until it is closed.
	stalled, closed atomic.Bool
}

func (c *holeConn) Close() error {
	c.closed.Store(true)
	c.f.forget(c.Conn)
	return c.Conn.Close()
}

// wait returns once no blackhole holds the connection, or when it is closed.
func (c *holeConn) wait() {
	for {
		c.f.mu.Lock()
		until, changed, closed := c.f.blackholeUntil, c.f.changed, c.f.closed
		c.f.mu.Unlock()
		if c.stalled.Load() && !c.closed.Load() && !closed {
			// Held until the connection or the proxy closes; the proxy's
			// side learns of a client's close only when it closes too.
			select {
			case <-changed:
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		d := time.Until(until)
		if d <= 0 {
			return
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-changed:
			t.Stop()
		}
	}
}

func (c *holeConn) Read(b []byte) (int, error) {
	c.wait()
	n, err := c.Conn.Read(b)
	c.wait()
	return n, err
}

func (c *holeConn) Write(b []byte) (int, error) {
	c.wait()
	return c.Conn.Write(b)
}
