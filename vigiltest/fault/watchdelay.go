package fault

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"

	"k8s.io/client-go/rest"

	"github.com/vigilkit/vigil/internal/serving/certs"
)

// quiet drops the reverse proxy's logs: resets it causes on purpose, and
// clients that go away, are not news.
var quiet = log.New(io.Discard, "", 0)

// startHTTP makes the proxy serve its connections with a TLS reverse proxy
// to the API server that answers what its faults decide and holds back
// watch responses by delay.
func (p *Proxy) startHTTP(cfg *rest.Config, delay time.Duration) error {
	ca, err := certs.NewCA("vigiltest-proxy-ca", 24*time.Hour)
	if err != nil {
		return err
	}
	serving, err := ca.Issue([]string{"127.0.0.1", "localhost"}, 24*time.Hour)
	if err != nil {
		return err
	}
	pair, err := serving.TLSCertificate()
	if err != nil {
		return err
	}
	upstream, err := rest.TransportFor(cfg)
	if err != nil {
		return fmt.Errorf("fault proxy: a transport to the API server: %w", err)
	}
	target, err := url.Parse(cfg.Host)
	if err != nil {
		return err
	}
	rp := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport:     upstream,
		FlushInterval: -1,
		ModifyResponse: func(resp *http.Response) error {
			if delay > 0 && isWatch(resp.Request) {
				p.mu.Lock()
				p.stats.Watches++
				p.mu.Unlock()
				resp.Body = newDelayedBody(resp.Body, delay)
			}
			return nil
		},
		ErrorLog: quiet,
	}
	p.inner = &connListener{addr: p.addrOf(), conns: make(chan net.Conn), closed: make(chan struct{})}
	p.httpSrv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r, done, answered := p.intercept(w, r)
			if answered {
				return
			}
			defer done()
			rp.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12},
		ErrorLog:          quiet,
	}
	p.config.TLSClientConfig.CAData = ca.CertPEM
	p.config.TLSClientConfig.CAFile = ""
	p.config.TLSClientConfig.ServerName = ""
	p.config.TLSClientConfig.Insecure = false
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		_ = p.httpSrv.ServeTLS(p.inner, "", "")
	}()
	return nil
}

func (p *Proxy) addrOf() net.Addr {
	a, _ := net.ResolveTCPAddr("tcp", p.addr)
	return a
}

// handOver gives an accepted connection to the reverse proxy, tracked so that
// Outage resets it.
func (p *Proxy) handOver(ln net.Listener, client net.Conn) {
	p.mu.Lock()
	if p.ln != ln {
		p.mu.Unlock()
		reset(client)
		return
	}
	p.conns[client] = struct{}{}
	p.stats.Accepted++
	p.mu.Unlock()
	tracked := &trackedConn{Conn: p.f.hole(client), onClose: func() {
		p.mu.Lock()
		delete(p.conns, client)
		p.mu.Unlock()
	}}
	select {
	case p.inner.conns <- tracked:
	case <-p.inner.closed:
		reset(client)
	}
}

func isWatch(r *http.Request) bool {
	if r == nil {
		return false
	}
	w := r.URL.Query().Get("watch")
	return w == "true" || w == "1"
}

// streamsList reports whether r is a watch that starts with its initial
// events: a streamed list.
func streamsList(r *http.Request) bool {
	return r.URL.Query().Get("sendInitialEvents") == "true"
}

// connListener is a net.Listener of connections handed over by the proxy.
type connListener struct {
	addr   net.Addr
	conns  chan net.Conn
	once   sync.Once
	closed chan struct{}
}

func (l *connListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *connListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *connListener) Addr() net.Addr { return l.addr }

type trackedConn struct {
	net.Conn
	once    sync.Once
	onClose func()
}

func (c *trackedConn) Close() error {
	c.once.Do(c.onClose)
	return c.Conn.Close()
}

// delayedBody passes on what it reads from src, each piece delay after it
// arrived, in order.
type delayedBody struct {
	src    io.ReadCloser
	delay  time.Duration
	pieces chan piece
	cur    []byte
	err    error
	once   sync.Once
	done   chan struct{}
}

type piece struct {
	data []byte
	at   time.Time
	err  error
}

func newDelayedBody(src io.ReadCloser, delay time.Duration) *delayedBody {
	b := &delayedBody{src: src, delay: delay, pieces: make(chan piece, 4096), done: make(chan struct{})}
	go b.fill()
	return b
}

func (b *delayedBody) fill() {
	defer close(b.pieces)
	for {
		buf := make([]byte, 32<<10)
		n, err := b.src.Read(buf)
		now := time.Now()
		if n > 0 {
			select {
			case b.pieces <- piece{data: buf[:n], at: now}:
			case <-b.done:
				return
			}
		}
		if err != nil {
			select {
			case b.pieces <- piece{err: err, at: now}:
			case <-b.done:
			}
			return
		}
	}
}

func (b *delayedBody) Read(out []byte) (int, error) {
	for len(b.cur) == 0 {
		if b.err != nil {
			return 0, b.err
		}
		pc, ok := <-b.pieces
		if !ok {
			b.err = io.EOF
			return 0, b.err
		}
		if wait := time.Until(pc.at.Add(b.delay)); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-b.done:
				t.Stop()
				return 0, errors.New("watch response closed")
			}
		}
		if pc.err != nil {
			b.err = pc.err
			return 0, b.err
		}
		b.cur = pc.data
	}
	n := copy(out, b.cur)
	b.cur = b.cur[n:]
	return n, nil
}

func (b *delayedBody) Close() error {
	b.once.Do(func() { close(b.done) })
	return b.src.Close()
}
