package vigiltest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// OutageProxy is a loopback TCP proxy between clients and the API server that
// can simulate the API server going away. TLS passes through it untouched, so
// clients verify the API server's own certificate.
//
// Restarting the real API server is no way to test this: it comes back with a
// new serving CA that existing clients reject. What a client sees of a restart
// is what Outage does: every open connection reset at once (a reset, not a
// silent drop, which client-go would only notice after its 45-second health
// check), then "connection refused" until the port is served again.
//
// With ProxyOptions.WatchDelay it also holds back watch events, so that
// informers behind it lag the API server as they do behind a slow network:
// see NewOutageProxyWith.
type OutageProxy struct {
	target string
	addr   string
	config *rest.Config

	// In the watch-delaying mode, connections are served by an HTTP reverse
	// proxy (inner) instead of being piped to the API server.
	watchDelay time.Duration
	inner      *connListener
	httpSrv    *http.Server

	f faults

	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]struct{}
	closed bool
	down   *time.Timer
	stats  ProxyStats

	wg sync.WaitGroup
}

// ProxyStats counts what an OutageProxy did.
type ProxyStats struct {
	Accepted int // connections passed through to the API server
	Reset    int // open connections reset by Outage
	Outages  int // calls of Outage
	Watches  int // watch responses held back by WatchDelay

	Blackholes int // calls of Blackhole
	Throttled  int // requests answered 429 by Throttle
	Expired    int // watches answered 410 Gone by ExpireWatches
	Stalls     int // calls of Stall
	Stalled    int // connections Stall held for good
}

// ProxyOptions configure an OutageProxy.
type ProxyOptions struct {
	// WatchDelay, when positive, holds every byte of every watch response
	// for this long before passing it on, so watch events reach clients that
	// much after the API server sent them, in order, while every other
	// response passes at once. The proxy then terminates TLS with a
	// certificate of its own (Config trusts it) and calls the API server
	// with the credentials of the config it was made from: clients act as
	// that config's user, or as whom they impersonate.
	WatchDelay time.Duration
	// Faults makes the proxy answer requests itself, as with WatchDelay, so
	// that Throttle and ExpireWatches can answer in the API server's place
	// (NewFaultProxy).
	Faults bool
}

// NewOutageProxy starts a proxy in front of the API server that cfg talks to.
// Point clients under test at it with Config.
func NewOutageProxy(cfg *rest.Config) (*OutageProxy, error) {
	return NewOutageProxyWith(cfg, ProxyOptions{})
}

// NewOutageProxyWith starts a proxy with options, such as one that holds back
// watch events.
func NewOutageProxyWith(cfg *rest.Config, o ProxyOptions) (*OutageProxy, error) {
	u, err := url.Parse(cfg.Host)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("outage proxy: expected the config's host to be a URL like https://127.0.0.1:6443, got %q", cfg.Host)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("outage proxy: listen: %w", err)
	}
	p := &OutageProxy{target: u.Host, addr: ln.Addr().String(), ln: ln, conns: map[net.Conn]struct{}{}}
	p.f.watches, p.f.changed, p.f.holes = map[*http.Request]context.CancelFunc{}, make(chan struct{}), map[net.Conn]*holeConn{}
	p.config = rest.CopyConfig(cfg)
	p.config.Host = "https://" + p.addr
	if p.config.TLSClientConfig.ServerName == "" {
		// Keep verifying the name the API server's certificate was issued for.
		p.config.TLSClientConfig.ServerName = u.Hostname()
	}
	if o.WatchDelay > 0 || o.Faults {
		if err := p.startHTTP(cfg, o.WatchDelay); err != nil {
			ln.Close()
			return nil, err
		}
	}
	p.wg.Add(1)
	go p.serve(ln)
	return p, nil
}

// Config returns a copy of the API server's config that connects through the proxy.
func (p *OutageProxy) Config() *rest.Config { return rest.CopyConfig(p.config) }

// Addr is the proxy's listening address.
func (p *OutageProxy) Addr() string { return p.addr }

// Stats returns the proxy's counters.
func (p *OutageProxy) Stats() ProxyStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Outage resets every open connection at once and stops listening for the
// given duration, so that new connections are refused, as by a host whose API
// server is restarting. It returns the number of connections it cut.
func (p *OutageProxy) Outage(d time.Duration) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0
	}
	p.stats.Outages++
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	n := p.cutLocked()
	if p.down != nil {
		p.down.Stop()
	}
	p.down = time.AfterFunc(d, p.relisten)
	return n
}

func (p *OutageProxy) cutLocked() int {
	n := 0
	for c := range p.conns {
		reset(c)
		delete(p.conns, c)
		n++
	}
	p.stats.Reset += n
	return n
}

// relisten serves the proxy's address again after an outage.
func (p *OutageProxy) relisten() {
	for attempt := 0; ; attempt++ {
		p.mu.Lock()
		if p.closed || p.ln != nil {
			p.mu.Unlock()
			return
		}
		ln, err := net.Listen("tcp", p.addr)
		if err == nil {
			p.ln = ln
			p.wg.Add(1)
			go p.serve(ln)
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		if attempt == 100 {
			panic(fmt.Sprintf("outage proxy: listen on %s again after the outage: %v", p.addr, err))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Close stops the proxy and resets every connection through it.
func (p *OutageProxy) Close() error {
	p.mu.Lock()
	p.closed = true
	if p.down != nil {
		p.down.Stop()
	}
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	p.cutLocked()
	p.mu.Unlock()
	p.f.mu.Lock()
	p.f.closed = true
	close(p.f.changed)
	p.f.changed = make(chan struct{})
	p.f.mu.Unlock()
	if p.httpSrv != nil {
		p.httpSrv.Close()
	}
	p.wg.Wait()
	return nil
}

func (p *OutageProxy) serve(ln net.Listener) {
	defer p.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		p.wg.Add(1)
		go p.pipe(ln, c)
	}
}

func (p *OutageProxy) pipe(ln net.Listener, client net.Conn) {
	defer p.wg.Done()
	if p.inner != nil {
		p.handOver(ln, client)
		return
	}
	server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		reset(client)
		return
	}
	p.mu.Lock()
	if p.ln != ln {
		// An outage began while this connection was being set up.
		p.mu.Unlock()
		reset(client)
		reset(server)
		return
	}
	p.conns[client] = struct{}{}
	p.conns[server] = struct{}{}
	p.stats.Accepted++
	p.mu.Unlock()

	done := make(chan struct{}, 2)
	copyHalf := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	held := p.f.hole(client)
	defer p.f.forget(client)
	go copyHalf(server, held)
	go copyHalf(held, server)
	<-done
	// One side ended: end both, so the other copy returns too.
	p.mu.Lock()
	delete(p.conns, client)
	delete(p.conns, server)
	p.mu.Unlock()
	client.Close()
	server.Close()
	<-done
}

// reset closes a connection with an RST rather than a FIN, as a crashed peer's
// kernel would, so the other end learns at once that it is gone.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}
