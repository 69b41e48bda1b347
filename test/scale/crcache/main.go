// Command crcache is what make bench-scale measures a module's informers
// against: controller-runtime's cache of every Pod with its default
// options (the whole objects, no transform), as a controller built on
// controller-runtime alone holds them. It serves /readyz on --probe-addr
// once the cache has synced, and /live, the bytes its heap holds after a
// collection; it runs until it is stopped.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig file")
	probe := flag.String("probe-addr", "127.0.0.1:0", "where /readyz is served")
	flag.Parse()
	if err := run(*kubeconfig, *probe); err != nil {
		fmt.Fprintln(os.Stderr, "crcache:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, probe string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 1000, 2000
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, err := cache.New(cfg, cache.Options{})
	if err != nil {
		return err
	}
	if _, err := c.GetInformer(ctx, &corev1.Pod{}); err != nil {
		return err
	}
	var synced atomic.Bool
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !synced.Load() {
			http.Error(w, "syncing", http.StatusServiceUnavailable)
		}
	})
	// /live collects the garbage and says the bytes the heap still holds.
	mux.HandleFunc("/live", func(w http.ResponseWriter, _ *http.Request) {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		fmt.Fprintln(w, ms.HeapAlloc)
	})
	srv := &http.Server{Addr: probe, ReadHeaderTimeout: 5 * time.Second, Handler: mux}
	go func() { _ = srv.ListenAndServe() }()
	defer srv.Close()
	go func() {
		if c.WaitForCacheSync(ctx) {
			synced.Store(true)
		}
	}()
	return c.Start(ctx)
}
