package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/vigilkit/vigil/internal/dev"
)

func newDevCommand(out, errOut io.Writer) *cobra.Command {
	o := &DevOptions{Progress: errOut}
	cmd := &cobra.Command{
		Use:   "dev [path]",
		Short: "Build a module and run all its roles locally, as a cluster would, with a timeline of what happens",
		Long: `Build the module whose main package is at path (default .) and run it the way
a cluster runs it: its gate phases in order, each as a separate process (as the
kubelet runs init containers), then its admission role — which creates its
empty webhook configurations, as its manifests would, and registers itself
once ready, reached through a loopback URL with a CA it keeps in the Secret
<module>-dev-tls — and its watcher role.

The cluster is the one --kubeconfig or KUBECONFIG names; without either, an
embedded control plane (kube-apiserver and etcd on loopback) is started, and
built first when missing.

It prints a timeline: each phase starting, what each gate waits for and last
saw, each phase done, the webhooks registered, each admission request admitted,
mutated or denied. Ctrl-C removes the module's webhook configurations, then
stops everything.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				o.Path = args[0]
			}
			return o.Run(cmd.Context(), out)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig of the cluster to run against (default KUBECONFIG; without either, an embedded control plane)")
	f.StringVar(&o.Context, "context", "", "kubeconfig context")
	f.StringVar(&o.Color, "color", "auto", "colour the timeline: auto (on a terminal, unless NO_COLOR is set), always or never")
	f.DurationVar(&o.GateProgress, "gate-progress", time.Second, "how often waiting gates report what they last saw")
	return cmd
}

// DevOptions are the options of `vigil dev`.
type DevOptions struct {
	Path         string
	Kubeconfig   string
	Context      string
	Color        string
	GateProgress time.Duration
	// Progress receives the control plane's build progress.
	Progress io.Writer
}

// Run runs the module until ctx ends.
func (o *DevOptions) Run(ctx context.Context, out io.Writer) error {
	switch o.Color {
	case "", "auto", "always", "never":
	default:
		return fmt.Errorf("--color %q: expected auto, always or never", o.Color)
	}
	kubeconfig := o.Kubeconfig
	if kubeconfig == "" {
		kubeconfig = os.Getenv("KUBECONFIG")
	}
	p := &dev.Printer{Out: out, Color: colorful(o.Color, out), Start: time.Now()}
	return dev.Run(ctx, dev.Options{
		Path: o.Path, Kubeconfig: kubeconfig, Context: o.Context, Progress: o.Progress,
		OnEvent: p.Print, GateProgress: o.GateProgress,
	})
}

// colorful says whether to colour output written to out.
func colorful(mode string, out io.Writer) bool {
	switch mode {
	case "always":
		return true
	case "never":
		return false
	}
	if os.Getenv("NO_COLOR") != "" {
		return false
	}
	f, ok := out.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
