package webhook

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"testing"
)

// pipeListener hands out one end of a pipe per Accept, from one address.
type pipeListener struct{ net.Listener }

type fakeAddr struct{}

func (fakeAddr) Network() string { return "tcp" }
func (fakeAddr) String() string  { return "10.0.0.7:40000" }

type pipeConn struct{ net.Conn }

func (pipeConn) RemoteAddr() net.Addr { return fakeAddr{} }

func (pipeListener) Accept() (net.Conn, error) {
	a, b := net.Pipe()
	_ = b.Close()
	return pipeConn{a}, nil
}

// BenchmarkConnLimitAccept is what the connection limits add to each
// connection: accept, count, close; and to each request: trackState twice.
func BenchmarkConnLimitAccept(b *testing.B) {
	l := newConnLimit(pipeListener{}, Limits{}.withDefaults())
	b.ReportAllocs()
	for b.Loop() {
		c, err := l.Accept()
		if err != nil {
			b.Fatal(err)
		}
		_ = c.Close()
	}
}

// BenchmarkConnLimitRequest is what the connection limits add to each
// request: trackState as its headers are read, markServing once its body
// is, trackState once answered.
func BenchmarkConnLimitRequest(b *testing.B) {
	l := newConnLimit(pipeListener{}, Limits{}.withDefaults())
	c, err := l.Accept()
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	r, err := http.NewRequestWithContext(withConn(context.Background(), c), http.MethodPost, "/", nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		trackState(c, http.StateActive)
		markServing(r)
		trackState(c, http.StateIdle)
	}
}

// fullListener is a connLimit of the default limits held full by three
// sources — 10.0.0.2 the largest, 256 connections, 10.0.0.3 255 and
// 10.0.0.4 one — all reading a request, and the listener under it.
func fullListener(b *testing.B) (*connLimit, *addrListener) {
	ln := &addrListener{}
	l := newConnLimit(ln, Limits{}.withDefaults())
	for src, n := range map[string]int{"10.0.0.2": 256, "10.0.0.3": 255, "10.0.0.4": 1} {
		for range n {
			ln.next = []netip.Addr{netip.MustParseAddr(src)}
			c, err := l.Accept()
			if err != nil {
				b.Fatal(err)
			}
			c.(*trackedConn).state.Store(stateReading)
			b.Cleanup(func() { _ = c.Close() })
		}
	}
	return l, ln
}

// BenchmarkConnLimitAcceptFull is the accept of a source below its fair
// share with the listener full of connections reading a request: it
// evicts one of the largest source's; then the flood takes the slot back,
// refused once it is at its share again.
func BenchmarkConnLimitAcceptFull(b *testing.B) {
	l, ln := fullListener(b)
	api, flood := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	b.ReportAllocs()
	for b.Loop() {
		ln.next = []netip.Addr{api}
		c, err := l.Accept()
		if err != nil {
			b.Fatal(err)
		}
		_ = c.Close()
		ln.next = []netip.Addr{flood}
		c, err = l.Accept()
		if err != nil {
			b.Fatal(err)
		}
		c.(*trackedConn).state.Store(stateReading)
	}
}

// BenchmarkConnLimitRefuseFull is the accept of a flooding source at its
// share with the listener full and nothing idle: refused, after a look for
// an idle connection it may take.
func BenchmarkConnLimitRefuseFull(b *testing.B) {
	l, ln := fullListener(b)
	flood := netip.MustParseAddr("10.0.0.2")
	b.ReportAllocs()
	for b.Loop() {
		ln.next = []netip.Addr{flood}
		if _, err := l.Accept(); !errors.Is(err, errNoMore) {
			b.Fatalf("a flooding source at its share, nothing idle: %v, want it refused", err)
		}
	}
}
