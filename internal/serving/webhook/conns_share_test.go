package webhook

import (
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"
)

// addrListener hands out one end of a pipe per Accept, from the next of
// its addresses; errNoMore once none is left.
type addrListener struct {
	net.Listener
	next []netip.Addr
}

var errNoMore = errors.New("no more connections")

type addrConn struct {
	net.Conn
	addr net.Addr
}

func (c addrConn) RemoteAddr() net.Addr { return c.addr }

func (l *addrListener) Accept() (net.Conn, error) {
	if len(l.next) == 0 {
		return nil, errNoMore
	}
	addr := l.next[0]
	l.next = l.next[1:]
	a, b := net.Pipe()
	_ = b.Close()
	return addrConn{a, net.TCPAddrFromAddrPort(netip.AddrPortFrom(addr, 40000))}, nil
}

// shareFixture is a connLimit of 8 connections, 6 per source, and the
// reasons it refused.
type shareFixture struct {
	t       *testing.T
	ln      *addrListener
	l       *connLimit
	refused map[string]int
}

func newShareFixture(t *testing.T) *shareFixture {
	f := &shareFixture{t: t, ln: &addrListener{}, refused: map[string]int{}}
	f.l = newConnLimit(f.ln, Limits{MaxConns: 8, MaxConnsPerSource: 6, Refused: func(r string) { f.refused[r]++ }}.withDefaults())
	return f
}

// accept accepts a connection from addr and puts it in state st, accepted
// a minute ago (past the new-connection grace); nil when it was refused.
func (f *shareFixture) accept(addr string, st int32) *trackedConn {
	f.t.Helper()
	f.ln.next = []netip.Addr{netip.MustParseAddr(addr)}
	c, err := f.l.Accept()
	if errors.Is(err, errNoMore) {
		return nil
	}
	if err != nil {
		f.t.Fatal(err)
	}
	tc := c.(*trackedConn)
	if t := tc.timer.Load(); t != nil {
		t.Stop()
	}
	tc.since.Store(time.Now().Add(-time.Minute).UnixNano())
	tc.state.Store(st)
	return tc
}

// With the listener full, a source below its fair share evicts a
// connection of the source holding the most — the oldest reading a
// request when none is idle — but never one whose handler runs; a source
// at its share or above evicts only idle connections, of its own or of a
// source holding more, and is refused when there is none.
func TestFairShareEviction(t *testing.T) {
	f := newShareFixture(t)
	// 127.0.0.2 holds 6, its cap: 2 serving, then 4 reading a body;
	// 127.0.0.3 holds 2, reading.
	var big []*trackedConn
	for i := range 6 {
		st := stateReading
		if i < 2 {
			st = stateServing
		}
		big = append(big, f.accept("127.0.0.2", st))
	}
	f.accept("127.0.0.3", stateReading)
	f.accept("127.0.0.3", stateReading)
	if f.l.open != 8 {
		t.Fatalf("%d open: want the listener full, 8", f.l.open)
	}

	// 127.0.0.2 at its cap is refused per source; 127.0.0.3, below its
	// share (8 over 2 sources: 4), evicts the oldest not served of
	// 127.0.0.2's: big[2].
	if c := f.accept("127.0.0.2", stateReading); c != nil || f.refused["per_source"] != 1 {
		t.Fatalf("a 7th connection of 127.0.0.2: refused %v; want it refused per_source", f.refused)
	}
	if c := f.accept("127.0.0.3", stateReading); c == nil || big[2].state.Load() != stateEvicted || f.refused["evicted_reading"] != 1 {
		t.Fatalf("a 3rd connection of 127.0.0.3, below its share: refused %v, big[2] in state %d; want it accepted and big[2], the oldest reading of the largest source, evicted_reading",
			f.refused, big[2].state.Load())
	}

	// A new source, 127.0.0.1, below its share (8 over 3 sources: 2): its
	// connection evicts the oldest not served of the largest, 127.0.0.2
	// (5, against 127.0.0.3's 3).
	api := f.accept("127.0.0.1", stateIdle)
	if api == nil || big[3].state.Load() != stateEvicted || f.refused["evicted_reading"] != 2 {
		t.Fatalf("127.0.0.1's first connection: refused %v, big[3] in state %d; want it accepted and big[3] evicted", f.refused, big[3].state.Load())
	}
	// Below its share still (it holds 1): big[4] goes.
	if f.accept("127.0.0.1", stateReading) == nil || big[4].state.Load() != stateEvicted {
		t.Fatalf("127.0.0.1's second connection: refused %v; want it accepted, big[4] evicted", f.refused)
	}
	// 127.0.0.2 and 127.0.0.3 (3 each), above their share, may not
	// take 127.0.0.1's idle connection: it holds fewer than they do. With
	// nothing else idle, they are refused.
	if f.accept("127.0.0.2", stateReading) != nil || f.accept("127.0.0.3", stateReading) != nil || api.state.Load() != stateIdle || f.refused["connections"] != 2 {
		t.Fatalf("127.0.0.1's idle connection was evicted for a source holding more, or one of those accepted (refused %v)", f.refused)
	}
	// At its share, 127.0.0.1's own idle connection makes room for its
	// next; then, nothing idle, the one after is refused.
	if f.accept("127.0.0.1", stateReading) == nil || api.state.Load() != stateEvicted || f.refused["evicted_idle"] != 1 {
		t.Fatalf("127.0.0.1's connection at its share, its own idle one open: refused %v; want its idle one evicted_idle", f.refused)
	}
	if f.accept("127.0.0.1", stateReading) != nil || f.refused["connections"] != 3 {
		t.Fatalf("127.0.0.1's connection at its share, nothing idle: accepted (refused %v); want it refused", f.refused)
	}
	// The two serving were never evicted.
	for i, c := range big[:2] {
		if c.state.Load() != stateServing {
			t.Errorf("big[%d], serving, was evicted", i)
		}
	}
}

// A connection evicted while its body was read is not marked serving, and
// a connection marked serving cannot be evicted: the two race only through
// one compare-and-swap.
func TestServingAndEvictionExcludeEachOther(t *testing.T) {
	f := newShareFixture(t)
	c := f.accept("127.0.0.2", stateReading)
	if old, ok := c.to(stateServing); !ok || old != stateReading {
		t.Fatalf("to(serving) from reading: %d %v", old, ok)
	}
	if c.state.CompareAndSwap(stateReading, stateEvicted) {
		t.Fatal("a serving connection was evicted as reading")
	}
	d := f.accept("127.0.0.2", stateReading)
	if !d.state.CompareAndSwap(stateReading, stateEvicted) {
		t.Fatal("a reading connection could not be evicted")
	}
	if _, ok := d.to(stateServing); ok {
		t.Fatal("an evicted connection was marked serving")
	}
	if _, ok := d.to(stateIdle); ok {
		t.Fatal("an evicted connection was marked idle")
	}
}

// A source below its share takes from the largest source that has a
// connection not served: not from one whose every connection's handler
// runs, however many it holds.
func TestFairShareSkipsASourceAllServed(t *testing.T) {
	f := newShareFixture(t)
	// 127.0.0.2 holds 4, all serving; 127.0.0.3 holds 3 reading; 127.0.0.4
	// one reading.
	var served []*trackedConn
	for range 4 {
		served = append(served, f.accept("127.0.0.2", stateServing))
	}
	var reading []*trackedConn
	for range 3 {
		reading = append(reading, f.accept("127.0.0.3", stateReading))
	}
	f.accept("127.0.0.4", stateReading)
	// 127.0.0.1: 4 sources, share 2; it holds 0.
	if f.accept("127.0.0.1", stateReading) == nil || reading[0].state.Load() != stateEvicted {
		t.Fatalf("a source below its share, the largest all served: refused %v, 127.0.0.3's oldest in state %d; want it evicted", f.refused, reading[0].state.Load())
	}
	for i, c := range served {
		if c.state.Load() != stateServing {
			t.Errorf("served[%d] was evicted", i)
		}
	}
}
