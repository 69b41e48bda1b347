package registration_test

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// webhookFront is a loopback TCP pass-through in front of a module's webhook
// server, where the API server calls it: TLS passes untouched, so the API
// server verifies the module's own certificate. Outage takes every replica
// away at once: open connections reset, new ones refused, for a while.
type webhookFront struct {
	addr, target string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]bool
	down  *time.Timer
	done  bool
}

// newFront starts a front to target (host:port), closed when the test ends.
func newFront(t *testing.T, target string) *webhookFront {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &webhookFront{addr: ln.Addr().String(), target: target, conns: map[net.Conn]bool{}}
	f.listen(ln)
	t.Cleanup(f.close)
	return f
}

// Addr is where the API server is to call.
func (f *webhookFront) Addr() string { return f.addr }

func (f *webhookFront) listen(ln net.Listener) {
	f.ln = ln
	go func() {
		for {
			c, err := ln.Accept()
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if err == nil {
				go f.pass(c)
			}
		}
	}()
}

// pass copies both ways between c and a new connection to the target.
func (f *webhookFront) pass(c net.Conn) {
	s, err := net.DialTimeout("tcp", f.target, 5*time.Second)
	if err != nil {
		abort(c)
		return
	}
	f.mu.Lock()
	if f.ln == nil {
		f.mu.Unlock()
		abort(c)
		abort(s)
		return
	}
	f.conns[c], f.conns[s] = true, true
	f.mu.Unlock()
	ended := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(s, c); ended <- struct{}{} }()
	go func() { _, _ = io.Copy(c, s); ended <- struct{}{} }()
	<-ended
	f.mu.Lock()
	delete(f.conns, c)
	delete(f.conns, s)
	f.mu.Unlock()
	c.Close()
	s.Close()
}

// Outage resets every open connection and refuses new ones for d.
func (f *webhookFront) Outage(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		return
	}
	f.stopLocked()
	if f.down != nil {
		f.down.Stop()
	}
	f.down = time.AfterFunc(d, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.done || f.ln != nil {
			return
		}
		ln, err := net.Listen("tcp", f.addr)
		if err != nil {
			panic("front: listen on " + f.addr + " again after the outage: " + err.Error())
		}
		f.listen(ln)
	})
}

func (f *webhookFront) stopLocked() {
	if f.ln != nil {
		f.ln.Close()
		f.ln = nil
	}
	for c := range f.conns {
		abort(c)
		delete(f.conns, c)
	}
}

func (f *webhookFront) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.done = true
	if f.down != nil {
		f.down.Stop()
	}
	f.stopLocked()
}

// abort closes c with a reset, as a crashed peer's kernel does.
func abort(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}
