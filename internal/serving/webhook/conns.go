package webhook

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// connLimit bounds a listener's open connections, in all and per source
// address, so that no client — nor any number of Pods flooding the port —
// holds the slots the API server needs:
//
//   - a source holds at most perSource connections: one more is closed at
//     once, before its TLS handshake costs anything (reason "per_source");
//   - with max connections open, a new one from a source holding fewer than
//     its fair share — max over the number of sources with connections, its
//     own counted — evicts a connection of the source holding the most
//     among those with one not served: its oldest idle one
//     ("evicted_idle"), or else its oldest still reading a request,
//     headers or body ("evicted_reading"). A new one from a source
//     at its share or above may only evict an idle connection, of a source
//     holding more than it or of its own; else it is closed at once
//     ("connections");
//   - a connection that has not sent its first request's headers within
//     firstRequest of its accept — a silent one, or one stuck in its TLS
//     handshake — is closed ("silent").
//
// So a flood from any number of sources leaves the API server, which holds
// few connections, below its share: its next connection always finds room,
// taken from the largest flood. Only a connection whose handler is running
// (its body read: markServing) is never evicted; a flood cannot reach that
// state without sending whole requests, bounded by MaxInFlight.
//
// Idle means kept alive between requests, or accepted with no request yet
// for longer than newGrace (a second, or firstRequest when shorter), so
// that a new connection's handshake and first request are not cut off by
// the next one's arrival unless its source is over its share.
// The state comes from the http.Server's ConnState hook (trackState) and
// from markServing: an atomic compare-and-swap per change, no lock; the
// lock is taken at accept and at close only.
type connLimit struct {
	net.Listener
	max, perSource int
	firstRequest   time.Duration
	newGrace       time.Duration
	// refused is told each connection closed or evicted, with the reason.
	refused func(reason string)
	// accepted is told each connection kept.
	accepted func()

	mu      sync.Mutex
	open    int
	sources map[netip.Addr]*source
}

// source is the connections of one client address, oldest first.
type source struct {
	addr       netip.Addr
	n          int
	head, tail *trackedConn
}

// A trackedConn's state.
const (
	// stateNew: accepted, no request's headers read yet.
	stateNew int32 = iota
	// stateIdle: kept alive between requests.
	stateIdle
	// stateReading: a request's headers read, its body being read.
	stateReading
	// stateServing: the request's handler decides; never evicted.
	stateServing
	// stateEvicted: chosen for eviction; final.
	stateEvicted
)

func newConnLimit(ln net.Listener, l Limits) *connLimit {
	return &connLimit{Listener: ln, max: l.MaxConns, perSource: l.MaxConnsPerSource, firstRequest: l.FirstRequestTimeout,
		newGrace: min(time.Second, l.FirstRequestTimeout), refused: l.Refused, accepted: l.Accepted, sources: map[netip.Addr]*source{}}
}

func (l *connLimit) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		addr := sourceOf(c.RemoteAddr())
		l.mu.Lock()
		src := l.sources[addr]
		var (
			victim *trackedConn
			reason string
		)
		switch {
		case src != nil && src.n >= l.perSource:
			l.mu.Unlock()
			l.reject(c, "per_source")
			continue
		case l.open >= l.max:
			if victim, reason = l.victimLocked(src); victim == nil {
				l.mu.Unlock()
				l.reject(c, "connections")
				continue
			}
			l.removeLocked(victim)
			src = l.sources[addr] // gone if the victim was its last
		}
		if src == nil {
			src = &source{addr: addr}
			l.sources[addr] = src
		}
		tc := &trackedConn{Conn: c, l: l, src: src}
		tc.since.Store(time.Now().UnixNano())
		tc.prev = src.tail
		if src.tail != nil {
			src.tail.next = tc
		} else {
			src.head = tc
		}
		src.tail = tc
		src.n++
		l.open++
		l.mu.Unlock()
		if victim != nil {
			// Closed under the server: its goroutine sees the error and
			// closes its side, which finds it removed already.
			l.refused(reason)
			if t := victim.timer.Load(); t != nil {
				t.Stop()
			}
			_ = victim.Conn.Close()
		}
		if l.firstRequest > 0 {
			tc.timer.Store(time.AfterFunc(l.firstRequest, tc.silent))
		}
		l.accepted()
		return tc, nil
	}
}

// reject closes a connection at once, with a reset: nothing is owed to it.
// It is counted first, so that whoever sees the reset finds it counted.
func (l *connLimit) reject(c net.Conn, reason string) {
	l.refused(reason)
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// victimLocked is the connection a new one from src (nil: a source with
// none yet) evicts with the listener full, marked evicted, and the reason;
// nil when none may be. Below its fair share, src takes from the source
// holding the most (the oldest of its connections not served, idle ones
// first); at its share or above, only an idle connection of a source
// holding more than src, or one of its own.
func (l *connLimit) victimLocked(src *source) (*trackedConn, string) {
	held, sources := 0, len(l.sources)
	if src != nil {
		held = src.n
	} else {
		sources++
	}
	share := max(1, l.max/sources)
	newBefore := time.Now().Add(-l.newGrace).UnixNano()
	// A candidate's state may change under the lock (trackState and
	// markServing take none): each is marked evicted by a compare-and-swap
	// of the state it was chosen in, and chosen again when that fails.
	for range 4 {
		var victim *trackedConn
		var from int32
		if held < share {
			victim, from = l.largestEvictableLocked(src, held, newBefore)
		}
		if victim == nil {
			victim, from = l.oldestIdleLocked(src, held, newBefore)
		}
		if victim == nil {
			return nil, ""
		}
		if victim.state.CompareAndSwap(from, stateEvicted) {
			if from == stateReading || (from == stateNew && victim.since.Load() > newBefore) {
				return victim, "evicted_reading"
			}
			return victim, "evicted_idle"
		}
	}
	return nil, ""
}

// largestEvictableLocked is the connection a source below its share,
// holding held, takes: of the source holding the most, other than src and
// more than held, that has one not served, its oldest idle one or else its
// oldest reading; and its state. Nil when there is none.
func (l *connLimit) largestEvictableLocked(src *source, held int, newBefore int64) (*trackedConn, int32) {
	var (
		largest *source
		victim  *trackedConn
		from    int32
	)
	for _, s := range l.sources {
		if s == src || s.n <= held || (largest != nil && s.n <= largest.n) {
			continue
		}
		if c, st := s.oldest(newBefore, true); c != nil {
			largest, victim, from = s, c, st
		}
	}
	return victim, from
}

// oldestIdleLocked is the oldest idle connection of src's own, or of the
// sources holding more than held, and its state; nil when none is idle.
func (l *connLimit) oldestIdleLocked(src *source, held int, newBefore int64) (*trackedConn, int32) {
	var victim *trackedConn
	var from int32
	for _, s := range l.sources {
		if s != src && s.n <= held {
			continue
		}
		c, st := s.oldest(newBefore, false)
		if c != nil && (victim == nil || c.since.Load() < victim.since.Load()) {
			victim, from = c, st
		}
	}
	return victim, from
}

func (l *connLimit) removeLocked(c *trackedConn) {
	if c.removed {
		return
	}
	c.removed = true
	src := c.src
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		src.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else {
		src.tail = c.prev
	}
	c.prev, c.next = nil, nil
	src.n--
	l.open--
	if src.n == 0 {
		delete(l.sources, src.addr)
	}
}

// oldest is the source's connection idle the longest, and its state; one
// with no request yet is idle once accepted before newBefore. With reading
// set, and none idle, it is the oldest accepted of those not served:
// reading a request, or new. Nil when there is none (or s is nil).
func (s *source) oldest(newBefore int64, reading bool) (*trackedConn, int32) {
	if s == nil {
		return nil, 0
	}
	var idle, busy *trackedConn
	var idleState, busyState int32
	for c := s.head; c != nil; c = c.next {
		st := c.state.Load()
		since := c.since.Load()
		switch {
		case st == stateIdle || (st == stateNew && since <= newBefore):
			if idle == nil || since < idle.since.Load() {
				idle, idleState = c, st
			}
		case reading && busy == nil && (st == stateReading || st == stateNew):
			busy, busyState = c, st // the list is in order of accept
		}
	}
	if idle != nil {
		return idle, idleState
	}
	return busy, busyState
}

// sourceOf is the client address a connection counts against: its IP,
// IPv4 in IPv6 unmapped.
func sourceOf(a net.Addr) netip.Addr {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.AddrPort().Addr().Unmap()
	}
	if ap, err := netip.ParseAddrPort(a.String()); err == nil {
		return ap.Addr().Unmap()
	}
	return netip.Addr{}
}

// trackedConn is a connection counted by a connLimit.
type trackedConn struct {
	net.Conn
	l   *connLimit
	src *source
	// Guarded by l.mu.
	prev, next *trackedConn
	removed    bool

	// state is one of the state constants; since is when the connection
	// was accepted or last became idle, in Unix nanoseconds.
	state atomic.Int32
	since atomic.Int64
	timer atomic.Pointer[time.Timer]
	once  sync.Once
}

// to moves the connection to state s, unless it was evicted; it says
// whether it did, and the state it left.
func (c *trackedConn) to(s int32) (int32, bool) {
	for {
		old := c.state.Load()
		if old == stateEvicted {
			return old, false
		}
		if c.state.CompareAndSwap(old, s) {
			return old, true
		}
	}
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		if t := c.timer.Load(); t != nil {
			t.Stop()
		}
		c.l.mu.Lock()
		c.l.removeLocked(c)
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}

// silent closes the connection when it has sent no request yet.
func (c *trackedConn) silent() {
	if !c.state.CompareAndSwap(stateNew, stateEvicted) {
		return
	}
	c.l.refused("silent")
	_ = c.Close()
}

// tracked is the trackedConn under c, a *tls.Conn's or c itself; nil
// when c is not one.
func tracked(c net.Conn) *trackedConn {
	if u, ok := c.(interface{ NetConn() net.Conn }); ok { // *tls.Conn
		c = u.NetConn()
	}
	tc, _ := c.(*trackedConn)
	return tc
}

// trackState is the http.Server's ConnState hook for connections of a
// connLimit: a connection is reading once a request's headers are read,
// until markServing, and idle between requests.
func trackState(c net.Conn, s http.ConnState) {
	tc := tracked(c)
	if tc == nil {
		return
	}
	switch s {
	case http.StateActive:
		if old, ok := tc.to(stateReading); ok && old == stateNew {
			if t := tc.timer.Load(); t != nil {
				t.Stop()
			}
		}
	case http.StateIdle:
		tc.since.Store(time.Now().UnixNano())
		tc.to(stateIdle)
	}
}

// connKey is the request context's key of its trackedConn.
type connKey struct{}

// withConn is the http.Server's ConnContext hook for connections of a
// connLimit: it puts the connection in its requests' context, for
// markServing.
func withConn(ctx context.Context, c net.Conn) context.Context {
	if tc := tracked(c); tc != nil {
		return context.WithValue(ctx, connKey{}, tc)
	}
	return ctx
}

// markServing tells the connection limits that r's handler now runs, its
// body read: its connection is no longer evicted. False when it was
// evicted already: the request is lost, its connection closed.
func markServing(r *http.Request) bool {
	tc, ok := r.Context().Value(connKey{}).(*trackedConn)
	if !ok {
		return true
	}
	_, ok = tc.to(stateServing)
	return ok
}

// serving marks as serving, before next runs, the requests that carry no
// body (probes, scrapes): nothing is left to read of them. Those with a
// body are marked once it is read (limited).
func serving(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength == 0 {
			markServing(r)
		}
		next.ServeHTTP(w, r)
	})
}
