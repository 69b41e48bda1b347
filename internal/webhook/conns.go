package webhook

import (
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// connLimit bounds a listener's open connections, in all and per source
// address, so that no one client — a Pod flooding the port, say — holds
// the slots the API server needs:
//
//   - a source holds at most perSource connections: one more is closed at
//     once, before its TLS handshake costs anything (reason "per_source");
//   - with max connections open, a new one evicts the oldest idle
//     connection of the source holding the most (reason "evicted_idle"),
//     or is closed at once when no connection is idle ("connections");
//   - a connection that has not sent its first request's headers within
//     firstRequest of its accept — a silent one, or one stuck in its TLS
//     handshake — is closed ("silent").
//
// Idle means kept alive between requests, or accepted with no request yet
// for longer than newGrace (a second, or firstRequest when shorter), so
// that a new connection's handshake and first request are not cut off by
// the next one's arrival; a connection whose request is being served is
// never evicted.
// The state comes from the http.Server's ConnState hook (trackState): an
// atomic store per request, no lock; the lock is taken at accept and at
// close only.
type connLimit struct {
	net.Listener
	max, perSource int
	firstRequest   time.Duration
	newGrace       time.Duration
	// refused is told each connection closed or evicted, with the reason.
	refused func(reason string)

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

func newConnLimit(ln net.Listener, l Limits) *connLimit {
	return &connLimit{Listener: ln, max: l.MaxConns, perSource: l.MaxConnsPerSource, firstRequest: l.FirstRequestTimeout,
		newGrace: min(time.Second, l.FirstRequestTimeout), refused: l.Refused, sources: map[netip.Addr]*source{}}
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
		var victim *trackedConn
		switch {
		case src != nil && src.n >= l.perSource:
			l.mu.Unlock()
			l.reject(c, "per_source")
			continue
		case l.open >= l.max:
			if victim = l.victimLocked(); victim == nil {
				l.mu.Unlock()
				l.reject(c, "connections")
				continue
			}
		}
		if victim != nil {
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
			l.refused("evicted_idle")
			if t := victim.timer.Load(); t != nil {
				t.Stop()
			}
			_ = victim.Conn.Close()
		}
		if l.firstRequest > 0 {
			tc.timer.Store(time.AfterFunc(l.firstRequest, tc.silent))
		}
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

// victimLocked is the oldest idle connection of the source that holds the
// most connections among those with one idle; nil when none is idle.
func (l *connLimit) victimLocked() *trackedConn {
	var victim *trackedConn
	most := 0
	newBefore := time.Now().Add(-l.newGrace).UnixNano()
	for _, src := range l.sources {
		if src.n < most {
			continue
		}
		c := src.oldestIdle(newBefore)
		if c == nil {
			continue
		}
		if src.n > most || c.since.Load() < victim.since.Load() {
			victim, most = c, src.n
		}
	}
	return victim
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

// oldestIdle is the source's connection idle the longest; nil when none
// is. One with no request yet is idle once accepted before newBefore.
func (s *source) oldestIdle(newBefore int64) *trackedConn {
	var oldest *trackedConn
	for c := s.head; c != nil; c = c.next {
		if c.busy.Load() {
			continue
		}
		since := c.since.Load()
		if !c.spoke.Load() && since > newBefore {
			continue
		}
		if oldest == nil || since < oldest.since.Load() {
			oldest = c
		}
	}
	return oldest
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

	// busy is true while a request is served; since is when the connection
	// was accepted or last became idle, in Unix nanoseconds.
	busy  atomic.Bool
	since atomic.Int64
	// spoke is set once the first request's headers are read.
	spoke atomic.Bool
	timer atomic.Pointer[time.Timer]
	once  sync.Once
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
	if c.spoke.Load() {
		return
	}
	c.l.refused("silent")
	_ = c.Close()
}

// trackState is the http.Server's ConnState hook for connections of a
// connLimit: it marks them busy while a request is served.
func trackState(c net.Conn, s http.ConnState) {
	if u, ok := c.(interface{ NetConn() net.Conn }); ok { // *tls.Conn
		c = u.NetConn()
	}
	tc, ok := c.(*trackedConn)
	if !ok {
		return
	}
	switch s {
	case http.StateActive:
		if !tc.spoke.Load() {
			tc.spoke.Store(true)
			if t := tc.timer.Load(); t != nil {
				t.Stop()
			}
		}
		tc.busy.Store(true)
	case http.StateIdle:
		tc.since.Store(time.Now().UnixNano())
		tc.busy.Store(false)
	}
}
