package bench

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigilkit/vigil/vigiltest"
)

// FloodOptions say what Flood opens against a port, as one client that can
// reach it — a Pod, say — would to take its connection slots.
type FloodOptions struct {
	// Addr is the host:port flooded.
	Addr string
	// Source is the local address the connections come from: 127.0.0.2
	// when empty. Linux routes all of 127.0.0.0/8 to loopback, so a
	// server on 127.0.0.1 sees the flood from another client than a test's
	// own (or the API server's) connections from 127.0.0.1.
	Source string
	// Silent connections open and send nothing, not even a TLS hello.
	Silent int
	// Idle connections send one request each (GET Path, over TLS when TLS
	// is set), read its answer and then hold the connection kept alive,
	// sending nothing more.
	Idle int
	// Trickle connections send the headers of a POST to Path announcing a
	// body of TrickleLength bytes, then that body one byte at a time,
	// TrickleEvery apart: requests the server is still reading, as long as
	// it lets them.
	Trickle int
	// TrickleLength is the Content-Length the trickling requests announce;
	// 60000 when zero.
	TrickleLength int
	// TrickleEvery is the time between a trickling request's bytes; a
	// second when zero.
	TrickleEvery time.Duration
	// TLS is the client configuration of the idle and trickling
	// connections; plain HTTP when nil. InsecureSkipVerify is fine: a flood does not care whom it
	// floods.
	TLS *tls.Config
	// Path the idle connections request; /healthz when empty.
	Path string
	// Redial, when not zero, opens a connection again that long after the
	// server closed (or refused) it, for as long as the flood runs, as a
	// client that keeps trying does. Zero dials each connection once.
	Redial time.Duration
	// For, when not zero, stops the flood by itself that long after it
	// began; it runs until Stop or the end of the test otherwise.
	For time.Duration
}

// The kinds of a flood's connections.
const (
	floodSilent = iota
	floodIdle
	floodTrickle
)

// Flooder is a flood running: see Flood.
type Flooder struct {
	opts   FloodOptions
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	open   atomic.Int64
	dialed atomic.Int64
	closed atomic.Int64
	failed atomic.Int64
	// tried counts the connections that have made their first attempt.
	tried atomic.Int64
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// Flood opens o.Silent silent, o.Idle idle keep-alive and o.Trickle
// trickling connections to o.Addr from o.Source, each in a goroutine of its
// own, and holds them until Stop, o.For or the end of the test. What the server does with them is
// read from Open, Dialed, ServerClosed and Failed.
func Flood(t testing.TB, o FloodOptions) *Flooder {
	t.Helper()
	if o.Addr == "" {
		t.Fatal("vigiltest.Flood: FloodOptions.Addr is empty: give the host:port to flood")
	}
	if o.Source == "" {
		o.Source = "127.0.0.2"
	}
	if o.Path == "" {
		o.Path = "/healthz"
	}
	if net.ParseIP(o.Source) == nil {
		t.Fatalf("vigiltest.Flood: FloodOptions.Source %q: expected an IP address, as in 127.0.0.2", o.Source)
	}
	if o.TrickleLength <= 0 {
		o.TrickleLength = 60000
	}
	if o.TrickleEvery <= 0 {
		o.TrickleEvery = time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	if o.For > 0 {
		ctx, cancel = context.WithTimeout(context.Background(), o.For)
	}
	f := &Flooder{opts: o, ctx: ctx, cancel: cancel, conns: map[net.Conn]struct{}{}}
	for i := range o.Silent + o.Idle + o.Trickle {
		kind := floodSilent
		switch {
		case i >= o.Silent+o.Idle:
			kind = floodTrickle
		case i >= o.Silent:
			kind = floodIdle
		}
		f.wg.Add(1)
		go f.run(ctx, kind)
	}
	go func() {
		// Stopped by For: its connections closed, as Stop closes them.
		<-ctx.Done()
		f.closeAll()
	}()
	t.Cleanup(f.Stop)
	return f
}

// Open is how many of the flood's connections are open now: established
// (for an idle one, its request answered) and not closed by the server.
func (f *Flooder) Open() int { return int(f.open.Load()) }

// Dialed is how many connections the flood has established in all.
func (f *Flooder) Dialed() int { return int(f.dialed.Load()) }

// ServerClosed is how many of its established connections the server has
// closed (or reset).
func (f *Flooder) ServerClosed() int { return int(f.closed.Load()) }

// Failed is how many attempts failed before the connection was
// established: a dial refused, a TLS handshake or the idle request cut off.
func (f *Flooder) Failed() int { return int(f.failed.Load()) }

// String sums the flood up, for a test's log.
func (f *Flooder) String() string {
	return fmt.Sprintf("flood of %s from %s (%d silent, %d idle, %d trickling): %d open, %d established in all, %d closed by the server, %d attempts failed",
		f.opts.Addr, f.opts.Source, f.opts.Silent, f.opts.Idle, f.opts.Trickle, f.Open(), f.Dialed(), f.ServerClosed(), f.Failed())
}

// WaitTried waits, within the window, until every connection of the
// flood has made its first attempt, whatever came of it.
func (f *Flooder) WaitTried(t testing.TB, within time.Duration) {
	t.Helper()
	n := int64(f.opts.Silent + f.opts.Idle + f.opts.Trickle)
	vigiltest.Eventually(t, within, func() error {
		if got := f.tried.Load(); got < n {
			return fmt.Errorf("%d of the flood's %d connections attempted", got, n)
		}
		return nil
	})
}

// Stop closes the flood's connections and waits for its goroutines.
func (f *Flooder) Stop() {
	f.cancel()
	f.closeAll()
	f.wg.Wait()
}

func (f *Flooder) closeAll() {
	f.mu.Lock()
	for c := range f.conns {
		_ = c.Close()
	}
	f.mu.Unlock()
}

func (f *Flooder) run(ctx context.Context, kind int) {
	defer f.wg.Done()
	first := true
	for ctx.Err() == nil {
		f.once(ctx, kind, func() {
			if first {
				first = false
				f.tried.Add(1)
			}
		})
		if f.opts.Redial <= 0 {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(f.opts.Redial):
		}
	}
}

// once makes one connection and holds it until the server closes it or
// the flood stops. tried is called once the attempt has an outcome.
func (f *Flooder) once(ctx context.Context, kind int, tried func()) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(f.opts.Source)}, Timeout: 5 * time.Second}
	raw, err := d.DialContext(ctx, "tcp", f.opts.Addr)
	if err != nil {
		f.failed.Add(1)
		tried()
		return
	}
	c := raw
	if !f.track(raw) {
		tried()
		return
	}
	defer f.untrack(raw)
	r := bufio.NewReader(c)
	if kind != floodSilent {
		_ = raw.SetDeadline(time.Now().Add(10 * time.Second))
		if f.opts.TLS != nil {
			tc := tls.Client(raw, f.opts.TLS)
			if err := tc.HandshakeContext(ctx); err != nil {
				f.failed.Add(1)
				tried()
				return
			}
			c = tc
			r = bufio.NewReader(c)
		}
	}
	switch kind {
	case floodTrickle:
		if _, err := fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: flood\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", f.opts.Path, f.opts.TrickleLength); err != nil {
			f.failed.Add(1)
			tried()
			return
		}
		_ = raw.SetDeadline(time.Time{})
		f.dialed.Add(1)
		f.open.Add(1)
		tried()
		f.trickle(ctx, c, r)
	case floodIdle:
		if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: flood\r\n\r\n", f.opts.Path); err != nil {
			f.failed.Add(1)
			tried()
			return
		}
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			f.failed.Add(1)
			tried()
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		_ = raw.SetDeadline(time.Time{})
		fallthrough
	default:
		f.dialed.Add(1)
		f.open.Add(1)
		tried()
		// Held: a read returns only when the server closes the connection
		// (or the flood stops).
		_, _ = r.ReadByte()
	}
	f.open.Add(-1)
	if ctx.Err() == nil {
		f.closed.Add(1)
	}
}

func (f *Flooder) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ctx.Err() != nil {
		_ = c.Close()
		return false
	}
	f.conns[c] = struct{}{}
	return true
}

func (f *Flooder) untrack(c net.Conn) {
	f.mu.Lock()
	delete(f.conns, c)
	f.mu.Unlock()
	_ = c.Close()
}

// trickle sends the announced body a byte at a time, TrickleEvery apart,
// until the server answers or closes the connection, the body is all sent,
// or the flood stops.
func (f *Flooder) trickle(ctx context.Context, c net.Conn, r *bufio.Reader) {
	answered := make(chan struct{})
	go func() {
		// The server's answer (a 408) or its close ends the request.
		_, _ = r.ReadByte()
		close(answered)
	}()
	tick := time.NewTicker(f.opts.TrickleEvery)
	defer tick.Stop()
	for range f.opts.TrickleLength {
		select {
		case <-ctx.Done():
			return
		case <-answered:
			return
		case <-tick.C:
		}
		if _, err := c.Write([]byte{' '}); err != nil {
			return
		}
	}
	<-answered
}
