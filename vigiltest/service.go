package vigiltest

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// service stands for the Service in front of a Deployment's replicas: one
// loopback address whose connections it spreads over the replicas' own, a
// connection at a time, round robin, as kube-proxy's IPVS mode does. A
// replica that refuses a connection (not yet listening, or stopped) is
// passed over for the next. It copies bytes and nothing else: TLS goes
// through it to the replicas.
type service struct {
	ln       net.Listener
	backends []string
	next     atomic.Uint64
	wg       sync.WaitGroup
	// open are the connections relayed now, closed when the test ends.
	mu     sync.Mutex
	open   map[net.Conn]bool
	closed bool
}

// newService listens on a free loopback port for backends, until the test
// ends.
func newService(t testing.TB, backends []string) *service {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("vigiltest: the Service in front of the replicas: %v", err)
	}
	s := &service{ln: ln, backends: backends, open: map[net.Conn]bool{}}
	s.wg.Add(1)
	go s.serve()
	t.Cleanup(func() {
		_ = ln.Close()
		s.mu.Lock()
		s.closed = true
		for c := range s.open {
			_ = c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

// Addr is the Service's address.
func (s *service) Addr() string { return s.ln.Addr().String() }

func (s *service) serve() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.relay(c.(*net.TCPConn))
		}()
	}
}

// relay connects c to the next replica that accepts, and copies both ways
// until each side has closed its half.
func (s *service) relay(c *net.TCPConn) {
	defer s.track(c)()
	var b *net.TCPConn
	first := int(s.next.Add(1) - 1)
	for i := range s.backends {
		addr := s.backends[(first+i)%len(s.backends)]
		if conn, err := net.Dial("tcp", addr); err == nil {
			b = conn.(*net.TCPConn)
			break
		}
	}
	if b == nil {
		_ = c.SetLinger(0) // no replica: a reset, as for a Service with no ready endpoint
		return
	}
	defer s.track(b)()
	done := make(chan struct{})
	go func() {
		halfCopy(b, c)
		close(done)
	}()
	halfCopy(c, b)
	<-done
}

// track records c as open, until the function it returns closes it; once
// the test has ended, it closes c at once.
func (s *service) track(c net.Conn) func() {
	s.mu.Lock()
	if s.closed {
		_ = c.Close()
	} else {
		s.open[c] = true
	}
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		delete(s.open, c)
		s.mu.Unlock()
		_ = c.Close()
	}
}

// halfCopy copies from src to dst (spliced in the kernel between TCP
// connections) and then closes dst's writing half, so that the far side
// sees the end of what src sent.
func halfCopy(dst, src *net.TCPConn) {
	if _, err := io.Copy(dst, src); err != nil && !errors.Is(err, net.ErrClosed) {
		_ = dst.SetLinger(0)
		_ = dst.Close()
		_ = src.Close()
		return
	}
	_ = dst.CloseWrite()
}
