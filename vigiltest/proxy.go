package vigiltest

import (
	"errors"
	"fmt"
	"io"
	"net"
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
// new serving CA that existing clients reject. Cutting the connections in
// between is what a restart looks like to a client, and a reset (not a silent
// drop) is noticed at once rather than after client-go's 45-second health check.
type OutageProxy struct {
	target string
	ln     net.Listener
	config *rest.Config

	mu          sync.Mutex
	conns       map[net.Conn]struct{}
	refuseUntil time.Time
	closed      bool
	stats       ProxyStats

	wg sync.WaitGroup
}

// ProxyStats counts what an OutageProxy did.
type ProxyStats struct {
	Accepted int // connections passed through to the API server
	Reset    int // open connections reset by Outage
	Refused  int // connections refused during an outage
}

// NewOutageProxy starts a proxy in front of the API server that cfg talks to.
// Point clients under test at it with Config.
func NewOutageProxy(cfg *rest.Config) (*OutageProxy, error) {
	u, err := url.Parse(cfg.Host)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("outage proxy: expected the config's host to be a URL like https://127.0.0.1:6443, got %q", cfg.Host)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("outage proxy: listen: %w", err)
	}
	p := &OutageProxy{target: u.Host, ln: ln, conns: map[net.Conn]struct{}{}}
	p.config = rest.CopyConfig(cfg)
	p.config.Host = "https://" + ln.Addr().String()
	if p.config.TLSClientConfig.ServerName == "" {
		// Keep verifying the name the API server's certificate was issued for.
		p.config.TLSClientConfig.ServerName = u.Hostname()
	}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Config returns a copy of the API server's config that connects through the proxy.
func (p *OutageProxy) Config() *rest.Config { return rest.CopyConfig(p.config) }

// Addr is the proxy's listening address.
func (p *OutageProxy) Addr() string { return p.ln.Addr().String() }

// Stats returns the proxy's counters.
func (p *OutageProxy) Stats() ProxyStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Outage resets every open connection at once and, for the given duration,
// resets each new connection as soon as it is accepted. It returns the number of
// connections it cut.
func (p *OutageProxy) Outage(d time.Duration) int {
	p.mu.Lock()
	p.refuseUntil = time.Now().Add(d)
	conns := make([]net.Conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
		delete(p.conns, c)
	}
	p.stats.Reset += len(conns)
	p.mu.Unlock()
	for _, c := range conns {
		reset(c)
	}
	return len(conns)
}

// Close stops the proxy and resets every connection through it.
func (p *OutageProxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.Outage(0)
	p.wg.Wait()
	return err
}

func (p *OutageProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		p.mu.Lock()
		if p.closed || time.Now().Before(p.refuseUntil) {
			p.stats.Refused++
			p.mu.Unlock()
			reset(c)
			continue
		}
		p.mu.Unlock()
		p.wg.Add(1)
		go p.pipe(c)
	}
}

func (p *OutageProxy) pipe(client net.Conn) {
	defer p.wg.Done()
	server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		reset(client)
		return
	}
	p.mu.Lock()
	if p.closed || time.Now().Before(p.refuseUntil) {
		p.stats.Refused++
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
	go copyHalf(server, client)
	go copyHalf(client, server)
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
