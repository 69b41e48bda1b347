package watcher

import (
	"fmt"
	"net"
	"net/http"
	"time"
)

// serveProbes answers /healthz and /readyz on addr until stop, for the
// watcher's whole life: /readyz fails with ready's error (the kinds waited
// for, informers not synced yet, a stale informer named), /healthz with
// live's (a restart would help).
func serveProbes(addr string, ready, live func() error) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("probes on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if err := live(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := ready(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	return func() { _ = srv.Close(); <-done }, nil
}
