// Command demo runs UDS Core's policy engine on vigil (examples/uds-core)
// through the story of vigil's founding discussion, with UDS Core's real
// names, on a real API server, and narrates it: `make demo`.
//
// It starts the module with nothing but its operator-config Secret
// installed, so its gates wait and say so; applies UDS Core's CRDs and the
// ClusterConfig uds-cluster-config a few seconds later; shows the phases
// passing in order and the webhooks registering only then (Fail, and Ignore
// in istio-system); creates a Pod (mutated to UDS Core's safe defaults), a
// privileged Pod (denied with UDS Core's message), adds an Exemption in
// uds-policy-exemptions and retries it (admitted); and checks that the
// watcher set the ClusterConfig's status to Ready. A failed step ends the
// demo with exit code 1 and names the step.
//
// UDS Core's CRDs come from the folder --crds names (UDS Core's own files,
// or the example's schemas in examples/uds-core/testdata/crds); without it,
// from stand-ins with the same names and an open schema (crds.yaml here).
// It lives beside vigil's own commands, not in the example: it drives vigil
// dev's session itself, as the vigil command does, which no module does.
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
	flags.StringVar(&o.kubeconfig, "kubeconfig", "", "run on this cluster instead of an embedded control plane (the demo installs UDS Core's CRDs and creates namespaces demo and uds-policy-exemptions)")
	flags.StringVar(&o.dir, "example", exampleDir(), "the uds-core example's folder")
	flags.StringVar(&o.crds, "crds", "", "a folder of CRD files for UDS Core's kinds (clusterconfig.uds.dev.yaml, exemptions.uds.dev.yaml): UDS Core's own, or examples/uds-core/testdata/crds; empty: the demo's stand-ins")
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

// exampleDir is the uds-core example, in the checkout this file is in.
func exampleDir() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return filepath.Join("examples", "uds-core")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "examples", "uds-core")
}
