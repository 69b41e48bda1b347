package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"

	"github.com/vigilkit/vigil/internal/runtime/events"
)

// Options configure Serve.
type Options struct {
	// Addr to listen on; ":9443" when empty.
	Addr string
	// CertFile and KeyFile hold the serving certificate (PEM); they are read
	// again when they change. GetCertificate, when set, is used instead.
	CertFile, KeyFile string
	GetCertificate    func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	// Handler serves the admission paths.
	Handler http.Handler
	// Metrics serves /metrics on MetricsAddr, over plain HTTP; the HTTPS
	// port serves no /metrics. None when nil or MetricsAddr is empty.
	Metrics     http.Handler
	MetricsAddr string
	// Pprof serves Go's profiles under /debug/pprof/ beside /metrics.
	Pprof bool
	// MetricsListening, when set, is called with the metrics address once
	// it listens.
	MetricsListening func(addr string)
	// MetricsLimits bound the metrics listener's connections with the
	// webhook's mechanism: its MaxConns (16 when zero), MaxConnsPerSource
	// (4), FirstRequestTimeout (3s), IdleTimeout (10s), HeaderTimeout (5s),
	// MaxHeaderBytes (32 KiB) and Refused apply.
	MetricsLimits Limits
	// Limits bound what clients can make the server hold.
	Limits Limits
	// Ready reports whether the module may take requests; /readyz answers
	// 503 with its error until it returns nil.
	Ready func() error
	// Live, when set, fails /healthz with its error: the process is stuck
	// in a way a restart would mend.
	Live func() error
	// ReadyDetail, when set, adds lines to a passing /readyz: conditions an
	// operator should see that do not make the module unready.
	ReadyDetail func() string
	// ShutdownDelay is how long the server keeps serving, not ready, after
	// it is told to stop: zero stops at once (the flag --shutdown-delay
	// carries the 5s default of a pod, which tests set to 0s).
	ShutdownDelay time.Duration
	// DrainTimeout bounds the wait for requests in flight; 20s when zero.
	DrainTimeout time.Duration
	// Lingering, when set, says how many requests in flight were answered
	// already: their bindings outlasted the deadline and still run. Once
	// they are all that is left, the drain closes their connections rather
	// than wait for them.
	Lingering func() int
	// Listening, when set, is called with the address once the server listens.
	Listening func(addr string)
	Log       logr.Logger
}

// logWriter turns net/http's error log into logr lines.
type logWriter struct{ log logr.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	w.log.Info("http server", "message", strings.TrimSpace(string(p)))
	return len(p), nil
}

func http1Only() *http.Protocols {
	p := &http.Protocols{}
	p.SetHTTP1(true)
	return p
}

// Serve serves until ctx ends, then stops gracefully.
func Serve(ctx context.Context, opts Options) error {
	if opts.Addr == "" {
		opts.Addr = ":9443"
	}
	if opts.ShutdownDelay < 0 {
		opts.ShutdownDelay = 0
	}
	if opts.DrainTimeout <= 0 {
		opts.DrainTimeout = 20 * time.Second
	}
	getCert, err := servingCertificate(ctx, opts)
	if err != nil {
		return err
	}

	var stopping atomic.Bool
	limits := opts.Limits.withDefaults()
	lim := newLimited(opts.Handler, limits)
	srv := admissionServer(admissionMux(opts, &stopping, lim), limits, getCert, opts.Log)
	tcp, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return fmt.Errorf("serve admission: listen on %s: %w", opts.Addr, err)
	}
	ln := newConnLimit(tcp, limits)
	if opts.Metrics != nil && opts.MetricsAddr != "" {
		metricsSrv, err := serveMetrics(opts)
		if err != nil {
			_ = ln.Close()
			return err
		}
		defer metricsSrv.Close()
	}
	events.Info(opts.Log, events.AdmissionServing, "admission server listening", "addr", ln.Addr().String())
	if opts.Listening != nil {
		opts.Listening(ln.Addr().String())
	}
	served := make(chan error, 1)
	go func() { served <- srv.ServeTLS(ln, "", "") }()

	select {
	case err := <-served:
		return fmt.Errorf("serve admission: %w", err)
	case <-ctx.Done():
	}
	stopping.Store(true)
	opts.Log.Info("stopping: not ready, still serving", "for", opts.ShutdownDelay.String())
	select {
	case <-time.After(opts.ShutdownDelay):
	case err := <-served:
		return fmt.Errorf("serve admission: %w", err)
	}
	return drain(opts, srv, lim)
}

// servingCertificate is opts.GetCertificate, or else the certificate of
// CertFile and KeyFile, read again when they change until ctx ends.
func servingCertificate(ctx context.Context, opts Options) (func(*tls.ClientHelloInfo) (*tls.Certificate, error), error) {
	getCert := opts.GetCertificate
	if getCert == nil {
		if opts.CertFile == "" || opts.KeyFile == "" {
			return nil, errors.New("serve admission: expected a serving certificate: set --cert-dir to a folder with tls.crt and tls.key")
		}
		cw, err := certwatcher.New(opts.CertFile, opts.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("serve admission: load the serving certificate: %w", err)
		}
		go func() {
			if err := cw.Start(ctx); err != nil {
				opts.Log.Error(err, "certificate watcher stopped")
			}
		}()
		getCert = cw.GetCertificate
	}
	return getCert, nil
}

// admissionMux serves the health and readiness probes, and the admission
// paths through the limits of lim; once stopping, /readyz fails and every
// answer closes its connection.
func admissionMux(opts Options, stopping *atomic.Bool, lim *limited) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if opts.Live != nil {
			if err := opts.Live(); err != nil {
				http.Error(w, "unhealthy: "+err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		switch {
		case stopping.Load():
			http.Error(w, "stopping", http.StatusServiceUnavailable)
		case opts.Ready != nil:
			if err := opts.Ready(); err != nil {
				http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
				return
			}
			_, _ = w.Write([]byte("ok\n"))
			if opts.ReadyDetail != nil {
				if d := opts.ReadyDetail(); d != "" {
					_, _ = w.Write([]byte(d + "\n"))
				}
			}
		default:
			_, _ = w.Write([]byte("ok\n"))
		}
	})
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if stopping.Load() {
			// Each connection still used while the server stops is closed
			// by its client after this answer, in order, rather than by
			// the drain while idle: the API server does not retry a review
			// it sent down a keep-alive connection the server was closing
			// just then (it sees EOF), and would apply the failure policy.
			w.Header().Set("Connection", "close")
		}
		lim.ServeHTTP(w, r)
	}))
	return mux
}

// admissionServer is the HTTPS server of mux, bounded by limits.
func admissionServer(mux *http.ServeMux, limits Limits, getCert func(*tls.ClientHelloInfo) (*tls.Certificate, error), logger logr.Logger) *http.Server {
	return &http.Server{
		Handler: serving(mux),
		// The TLS handshake and the headers within HeaderTimeout (net/http
		// bounds the handshake by the smallest of its timeouts); a body
		// within BodyTimeout, set per request by the limits, and ReadTimeout
		// as a backstop; an answer within WriteTimeout, beyond the longest a
		// webhook may take (30s).
		ReadHeaderTimeout: limits.HeaderTimeout,
		ReadTimeout:       limits.HeaderTimeout + limits.BodyTimeout,
		WriteTimeout:      limits.HeaderTimeout + limits.BodyTimeout + 40*time.Second,
		MaxHeaderBytes:    limits.MaxHeaderBytes,
		IdleTimeout:       limits.IdleTimeout,
		// Tell the connection limits which connections are idle, reading
		// a request or serving one.
		ConnState:   trackState,
		ConnContext: withConn,
		// HTTP/1.1 only. The API server's webhook client offers HTTP/2
		// too, but over HTTP/2 a review costs this server about 1.35 times
		// the CPU it costs over HTTP/1.1 keep-alive (make bench-admission,
		// admission-h2), and HTTP/2 would bring its own abuse to bound
		// (streams per connection, rapid resets) beside the limits here.
		TLSConfig: &tls.Config{
			MinVersion:     tls.VersionTLS12,
			GetCertificate: getCert,
			NextProtos:     []string{"http/1.1"},
		},
		Protocols: http1Only(),
		// TLS handshake failures of probing clients are not the module's
		// errors: keep them out of its log unless asked for.
		ErrorLog: log.New(logWriter{logger.V(1)}, "", 0),
	}
}

// serveMetrics serves /metrics, and the profiles when asked for, on
// MetricsAddr over plain HTTP until the server it returns is closed.
func serveMetrics(opts Options) (*http.Server, error) {
	mtcp, err := net.Listen("tcp", opts.MetricsAddr)
	if err != nil {
		return nil, fmt.Errorf("serve metrics: listen on %s: %w", opts.MetricsAddr, err)
	}
	ml := metricsLimits(opts.MetricsLimits)
	mln := newConnLimit(mtcp, ml)
	mmux := http.NewServeMux()
	mmux.Handle("/metrics", opts.Metrics)
	if opts.Pprof {
		mmux.HandleFunc("/debug/pprof/", pprof.Index)
		mmux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mmux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mmux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	metricsSrv := &http.Server{
		Handler: serving(mmux), ReadHeaderTimeout: ml.HeaderTimeout, ReadTimeout: ml.HeaderTimeout + ml.BodyTimeout,
		WriteTimeout: 30 * time.Second, MaxHeaderBytes: ml.MaxHeaderBytes, IdleTimeout: ml.IdleTimeout,
		ConnState: trackState, ConnContext: withConn, Protocols: http1Only(),
		ErrorLog: log.New(logWriter{opts.Log.V(1)}, "", 0),
	}
	go func() {
		if err := metricsSrv.Serve(mln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			opts.Log.Error(err, "metrics server stopped")
		}
	}()
	opts.Log.Info("metrics listening", "addr", mln.Addr().String())
	if opts.MetricsListening != nil {
		opts.MetricsListening(mln.Addr().String())
	}
	return metricsSrv, nil
}

// drain shuts srv down within DrainTimeout, waiting for the requests in
// flight; once those left are only lingering ones, answered at their
// deadline, it closes their connections.
func drain(opts Options, srv *http.Server, lim *limited) error {
	ctx, cancel := context.WithTimeout(context.Background(), opts.DrainTimeout)
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(ctx) }()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-shut:
			if err != nil {
				return fmt.Errorf("drain admission requests: %w", err)
			}
			opts.Log.Info("admission server stopped")
			return nil
		case <-tick.C:
			if n := lim.active.Load(); n > 0 && opts.Lingering != nil && int64(opts.Lingering()) >= n {
				opts.Log.Info("stopping: the requests left were answered at their deadline, their bindings still run: closing their connections", "requests", n)
				_ = srv.Close()
			}
		}
	}
}
