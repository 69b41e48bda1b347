// Command demo runs the clusterconfig module through the story of vigil's
// founding discussion, on a real API server, and narrates it: `make demo`.
//
// It starts the module with nothing installed, so its gates wait and say so;
// applies the CRDs, the ClusterConfig and an Exemption a few seconds later;
// shows the phases passing in order and the webhooks registering only then;
// creates a Pod (mutated: it gets the cluster's label), a privileged Pod
// (denied, with the policy's message), adds an Exemption and retries it
// (admitted); and checks that the watcher wrote the ClusterConfig's status.
// A failed step ends the demo with exit code 1 and names the step.
//
// By default it runs on an embedded control plane of its own (never on the
// cluster KUBECONFIG names); --kubeconfig picks a cluster explicitly.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"syscall"

	"golang.org/x/term"
)

func main() {
	o := options{out: os.Stdout, progress: os.Stderr}
	// A flag set of its own: controller-runtime registers --kubeconfig on
	// the global one.
	flags := flag.NewFlagSet("demo", flag.ExitOnError)
	flags.StringVar(&o.kubeconfig, "kubeconfig", "", "run on this cluster instead of an embedded control plane (the demo installs CRDs and creates namespaces demo and uds-policy-exemptions)")
	flags.StringVar(&o.dir, "example", exampleDir(), "the clusterconfig example's folder")
	color := flags.String("color", "auto", "auto, always or never")
	_ = flags.Parse(os.Args[1:])
	switch *color {
	case "always":
		o.color = true
	case "auto":
		o.color = os.Getenv("NO_COLOR") == "" && term.IsTerminal(int(os.Stdout.Fd()))
	case "never":
	default:
		fmt.Fprintf(os.Stderr, "demo: --color %q: expected auto, always or never\n", *color)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	_, err := runDemo(ctx, o)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		os.Exit(1)
	}
}

// exampleDir is the clusterconfig example, beside this file.
func exampleDir() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return filepath.Join("examples", "clusterconfig")
	}
	return filepath.Dir(filepath.Dir(file))
}
