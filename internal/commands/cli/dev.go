package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/vigilkit/vigil/internal/commands/cmdutil"
	"github.com/vigilkit/vigil/internal/commands/dev"
)

func newDevCommand(out, errOut io.Writer) *cobra.Command {
	o := &DevOptions{Progress: errOut}
	cmd := &cobra.Command{
		Use:   "dev [path]",
		Short: "Build a module and run all its roles locally, as a cluster would, with a timeline of what happens",
		Long: `Build the module whose main package is at path (default .) and run it the way
a cluster runs it: its gate phases in order, each as a separate process (as the
kubelet runs init containers), then — once it has created the module's empty
webhook configurations and opt-out guards, as its manifests would — its
admission role, which registers itself once ready, reached through a
loopback URL with a CA it keeps in the Secret <module>-dev-tls, and its
watcher role.

The cluster is the one --kubeconfig or KUBECONFIG names; without either, an
embedded control plane (kube-apiserver and etcd on loopback) is started, and
built first when missing.

Each process gets the env and volumes the module declares for its container
(vigil.Env, vigil.MountSecret, vigil.MountConfigMap): Secret and ConfigMap keys
are read from the cluster and written as files under the session's temporary
folder, which VIGIL_MOUNT_ROOT names (the module finds them with the mount's
Path). A process whose required Secret or ConfigMap is missing waits for it,
as the kubelet would.

It prints a timeline: each phase starting, what each gate waits for and last
saw, each phase done, the webhooks registered, each admission request admitted,
mutated or denied. Ctrl-C removes the module's webhook configurations and opt-out
guards, then stops everything.

What vigil dev creates in the cluster — the module's webhook configurations
and opt-out guards — carries the label vigil.dev/dev-session=<module>; what a
real install owns is never touched, and vigil dev refuses to run where the
module's configurations exist without that label. Its processes die with it,
even when it is killed (on Linux). A vigil dev that was killed leaves its
configurations pointing at a proxy that is gone, so that every request they
match fails: the next vigil dev of the module removes them first, and

  vigil dev --clean [path]

removes them without running anything.`,
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
	cmdutil.AddKubernetesFlag(f, &o.Kubernetes, "the embedded control plane (without --kubeconfig)")
	f.StringVar(&o.Color, "color", "auto", "colour the timeline: auto (on a terminal, unless NO_COLOR is set), always or never")
	f.DurationVar(&o.GateProgress, "gate-progress", time.Second, "how often waiting gates report what they last saw")
	f.BoolVar(&o.Clean, "clean", false, "remove what a vigil dev of the module that was killed left in the cluster (its webhook configurations and opt-out guards), then exit")
	return cmd
}

// DevOptions are the options of `vigil dev`.
type DevOptions struct {
	Path         string
	Kubeconfig   string
	Context      string
	Color        string
	GateProgress time.Duration
	Kubernetes   cmdutil.KubernetesFlag
	// Clean removes what earlier sessions left, and runs nothing.
	Clean bool
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
	release, err := o.Kubernetes.Release()
	if err != nil {
		return err
	}
	p := &dev.Printer{Out: out, Color: colorful(o.Color, out), Start: time.Now(), GateProgress: o.GateProgress}
	do := dev.Options{
		Path: o.Path, Kubeconfig: kubeconfig, Context: o.Context, Progress: o.Progress, Kubernetes: release,
		OnEvent: p.Print, GateProgress: o.GateProgress,
	}
	if o.Clean {
		_, err := dev.Clean(ctx, do)
		return err
	}
	return dev.Run(ctx, do)
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
