// Command control-plane builds the Kubernetes binaries vigil runs, for one
// supported release, and prints their folder: the control plane
// (kube-apiserver, etcd, kubectl) by default, or a node's binaries with
// --node, or the containerd a node may run instead of the machine's with
// --containerd, or the kwok `make bench-scale` runs with --kwok. It imports
// nothing but the builder, so on a fresh machine it compiles in seconds and
// the build's progress starts at once.
//
//	go run ./hack/control-plane [--kubernetes 1.34] [--node | --containerd | --kwok]
//	go run ./hack/control-plane --list
//
// The version comes from --kubernetes, else $VIGIL_KUBERNETES_VERSION, else
// the default release.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/vigilkit/vigil/internal/clusters/k8sbuild"
	"github.com/vigilkit/vigil/internal/clusters/kubeversion"
)

func main() {
	version := flag.String("kubernetes", "", "the Kubernetes release to build: one of "+kubeversion.Names()+" (default $"+kubeversion.Env+", else "+kubeversion.Default().String()+")")
	list := flag.Bool("list", false, "print the supported releases, oldest first, one per line, and build nothing")
	node := flag.Bool("node", false, "build the node's binaries (kubelet, kube-proxy, kube-controller-manager, kube-scheduler) instead of the control plane's")
	containerd := flag.Bool("containerd", false, "build containerd "+k8sbuild.Containerd+" (containerd, containerd-shim-runc-v2, ctr), which a node runs in place of the machine's with VIGIL_NODE_CONTAINERD=built, instead of the control plane")
	kwok := flag.Bool("kwok", false, "build kwok "+k8sbuild.Kwok+", which simulates nodes and pods for make bench-scale, instead of the control plane")
	flag.Parse()
	if n := countTrue(*node, *containerd, *kwok); n > 1 {
		fail(fmt.Errorf("--node, --containerd and --kwok: expected at most one"))
	}
	if flag.NArg() > 0 {
		fail(fmt.Errorf("unexpected arguments %q: expected only flags", flag.Args()))
	}
	if *list {
		for _, r := range kubeversion.Supported() {
			fmt.Println(r)
		}
		return
	}
	r, err := kubeversion.FromEnv()
	if *version != "" {
		r, err = kubeversion.Parse(*version)
		if err != nil {
			err = fmt.Errorf("--kubernetes: %w", err)
		}
	}
	if err != nil {
		fail(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ensure := k8sbuild.Ensure
	if *node {
		ensure = k8sbuild.EnsureNode
	}
	if *containerd {
		ensure = k8sbuild.EnsureContainerd
	}
	if *kwok {
		ensure = k8sbuild.EnsureKwok
	}
	dir, err := ensure(ctx, k8sbuild.BuildOptions{Release: r, Progress: os.Stderr})
	if err != nil {
		fail(err)
	}
	fmt.Println(dir)
}

func countTrue(flags ...bool) int {
	n := 0
	for _, f := range flags {
		if f {
			n++
		}
	}
	return n
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "control-plane:", err)
	os.Exit(1)
}
