package fault

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// Proxy stands between clients and the API server on loopback and does to
// their connections and requests what a network, a load balancer or the API
// server itself does when things go wrong. Every fault is valid on every
// proxy:
//   - Outage: every open connection reset at once, then "connection refused"
//     until the port is served again, as a restarting API server looks to
//     its clients (restarting the real one is no way to test this: it comes
//     back with a new serving CA that existing clients reject);
//   - Cut: every open connection reset, new ones served;
//   - Blackhole: nothing passes either way for a while, with no reset;
//   - Stall: every open connection half-open for good, new ones served;
//   - Throttle: 429 Too Many Requests with Retry-After;
//   - ExpireWatches: open watches ended and new ones resuming from a
//     resourceVersion answered 410 Gone;
//   - Options.WatchDelay: watch events held back, as behind a slow network.
//
// It terminates TLS with a certificate of its own, which Config trusts, and
// calls the API server with the credentials of the config it was made from:
// clients act as that config's user, or as whom they impersonate. Point
// the code under test at it with Config, or with a kubeconfig of Config.
type Proxy struct {
	addr   string
	config *rest.Config

	// Connections are served by an HTTP reverse proxy (inner) that answers
	// what the faults decide and passes the rest on to the API server.
	inner   *connListener
	httpSrv *http.Server

	f faults

	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]struct{}
	closed bool
	down   *time.Timer
	stats  Stats

	wg sync.WaitGroup
}

// Stats counts what an Proxy did.
type Stats struct {
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

// Options configure a Proxy.
type Options struct {
	// WatchDelay, when positive, holds every byte of every watch response
	// for this long before passing it on, so watch events reach clients that
	// much after the API server sent them, in order, while every other
	// response passes at once.
	WatchDelay time.Duration
}

// NewProxy starts a proxy in front of the API server that cfg talks to.
// Point clients under test at it with Config; Close it when the test ends.
func NewProxy(cfg *rest.Config, o Options) (*Proxy, error) {
	u, err := url.Parse(cfg.Host)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("fault proxy: expected the config's host to be a URL like https://127.0.0.1:6443, got %q", cfg.Host)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("fault proxy: listen: %w", err)
	}
	p := &Proxy{addr: ln.Addr().String(), ln: ln, conns: map[net.Conn]struct{}{}}
	p.f.watches, p.f.changed, p.f.holes = map[*http.Request]context.CancelFunc{}, make(chan struct{}), map[net.Conn]*holeConn{}
	p.config = rest.CopyConfig(cfg)
	p.config.Host = "https://" + p.addr
	if err := p.startHTTP(cfg, o.WatchDelay); err != nil {
		ln.Close()
		return nil, err
	}
	p.wg.Add(1)
	go p.serve(ln)
	return p, nil
}

// Config returns a copy of the API server's config that connects through the proxy.
func (p *Proxy) Config() *rest.Config { return rest.CopyConfig(p.config) }

// Stats returns the proxy's counters.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Outage resets every open connection at once and stops listening for the
// given duration, so that new connections are refused, as by a host whose API
// server is restarting. It returns the number of connections it cut.
func (p *Proxy) Outage(d time.Duration) int {
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

func (p *Proxy) cutLocked() int {
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
func (p *Proxy) relisten() {
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
			panic(fmt.Sprintf("fault proxy: listen on %s again after the outage: %v", p.addr, err))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Close stops the proxy and resets every connection through it.
func (p *Proxy) Close() error {
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

func (p *Proxy) serve(ln net.Listener) {
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

func (p *Proxy) pipe(ln net.Listener, client net.Conn) {
	defer p.wg.Done()
	p.handOver(ln, client)
}

// reset closes a connection with an RST rather than a FIN, as a crashed peer's
// kernel would, so the other end learns at once that it is gone.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}
