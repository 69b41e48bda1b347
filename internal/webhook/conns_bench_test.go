package webhook

import (
	"net"
	"net/http"
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

func BenchmarkConnLimitRequest(b *testing.B) {
	l := newConnLimit(pipeListener{}, Limits{}.withDefaults())
	c, err := l.Accept()
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	b.ReportAllocs()
	for b.Loop() {
		trackState(c, http.StateActive)
		trackState(c, http.StateIdle)
	}
}
