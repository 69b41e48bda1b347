// Command crcache is what make bench-scale measures a module's informers
// against: controller-runtime's cache of every Pod with its default
// options (the whole objects, no transform), as a controller built on
// controller-runtime alone holds them. It serves /readyz on --probe-addr
// once the cache has synced, and holds it until it is stopped.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
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
	srv := &http.Server{Addr: probe, ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !synced.Load() {
			http.Error(w, "syncing", http.StatusServiceUnavailable)
		}
	})}
	go func() { _ = srv.ListenAndServe() }()
	defer srv.Close()
	go func() {
		if c.WaitForCacheSync(ctx) {
			synced.Store(true)
		}
	}()
	return c.Start(ctx)
}
