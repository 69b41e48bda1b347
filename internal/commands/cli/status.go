package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/vigilkit/vigil/internal/commands/cmdutil"
	"github.com/vigilkit/vigil/internal/operating/monitor"
	"github.com/vigilkit/vigil/internal/operating/status"
)

// clusterFlags are the kubeconfig flags of the commands that read a cluster.
type clusterFlags struct {
	kubeconfig, context string
}

func (f *clusterFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file; KUBECONFIG, ~/.kube/config or, in a pod, its ServiceAccount otherwise")
	cmd.Flags().StringVar(&f.context, "context", "", "kubeconfig context")
}

func (f *clusterFlags) clients() (status.Clients, error) {
	cfg, err := cmdutil.LoadConfig(f.kubeconfig, f.context)
	if err != nil {
		return status.Clients{}, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return status.Clients{}, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return status.Clients{}, err
	}
	return status.Clients{Kube: cs, Dynamic: dyn}, nil
}

func newStatusCommand(out io.Writer) *cobra.Command {
	var (
		cluster  clusterFlags
		opts     status.Options
		output   string
		watch    bool
		interval time.Duration
	)
	cmd := &cobra.Command{
		Use:   "status [MODULE]",
		Short: "Show the vigil modules of a cluster: replicas, starting gates, registration, outages, audit, other webhooks",
		Long: `Show every vigil module in the cluster, or one: its version and the fingerprint
of its definition, replicas ready per role; for each pod still starting, the
phase and gate it is in, what that gate waits for, since when and what it last
saw; the registration of each webhook configuration (probing, enforced,
failed open, with times), drifts repaired, outage windows, the audit's
PolicyReports, the cluster's other webhooks called when the module's pods are
created, and any deadlock with them.

It reads with a cluster viewer's rights (the view ClusterRole, and list on
mutating and validating webhook configurations for the last part); what it
may not read is named at the end, with the right to grant.

A module's namespace is the one its webhook configurations' Service names
(else its ClusterRoleBindings' ServiceAccounts: list on clusterrolebindings),
never a Deployment's labels alone, which whoever may create a Deployment may
write: Deployments labelled as a module's elsewhere are listed as not taken
for it, and when nothing confirms a namespace each is shown, saying so.

Installed as kubectl-vigil on the PATH (a link to vigil), it is also
` + "`kubectl vigil status`" + `.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.Module = args[0]
			}
			if output != "text" && output != "json" {
				return fmt.Errorf("-o %q: expected text or json", output)
			}
			c, err := cluster.clients()
			if err != nil {
				return err
			}
			return runStatus(cmd.Context(), out, c, opts, output == "json", watch, interval)
		},
	}
	cluster.add(cmd)
	cmd.Flags().StringVarP(&opts.Namespace, "namespace", "n", "", "look for modules in this namespace only; every namespace when empty")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text, or json (schema "+status.SchemaVersion+")")
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "redraw whenever the status changes, until interrupted: at once for what the API server announces, every --interval for logs and reports")
	cmd.Flags().DurationVar(&interval, "interval", 2*time.Second, "with --watch: how often to read again what no watch announces (a starting pod's gate log lines, PolicyReports)")
	return cmd
}

// runStatus prints the report once, or with watch each time it changes.
func runStatus(ctx context.Context, out io.Writer, c status.Clients, o status.Options, asJSON, watch bool, interval time.Duration) error {
	var (
		last    []byte
		changes <-chan struct{}
	)
	if watch {
		changes = status.Changes(ctx, c, o)
	}
	var read time.Time
	for {
		read = time.Now()
		r, err := status.Collect(ctx, c, o)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if o.Module != "" && len(r.Modules) == 0 && !watch {
			if len(r.NotBelieved) > 0 {
				nb := r.NotBelieved[0]
				return fmt.Errorf("module %s: the Deployments labelled as its in namespace %s are not taken for it: %s", o.Module, nb.Namespace, nb.Why)
			}
			return fmt.Errorf("module %s: no Deployment labelled app.kubernetes.io/part-of=%s,app.kubernetes.io/managed-by=vigil%s: is it installed?%s",
				o.Module, o.Module, inNamespace(o.Namespace), missingHint(r))
		}
		var buf bytes.Buffer
		var text bytes.Buffer
		if asJSON {
			err = status.WriteJSON(&buf, r)
		} else {
			err = status.Write(&buf, r, time.Now())
			// Compare without the ages, which change every second.
			_ = status.Write(&text, r, time.Time{})
		}
		if err != nil {
			return err
		}
		key := buf.Bytes()
		if !asJSON {
			key = text.Bytes()
		}
		if !watch {
			_, err = out.Write(buf.Bytes())
			return err
		}
		if !bytes.Equal(key, last) {
			if !asJSON {
				fmt.Fprint(out, "\x1b[H\x1b[2J")
				fmt.Fprintf(out, "%s  (on each change; logs and reports every %s; Ctrl-C to stop)\n\n", time.Now().Format(time.RFC3339), interval)
			}
			if _, err := out.Write(buf.Bytes()); err != nil {
				return err
			}
			last = append(last[:0], key...)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changes:
			// The changes that come with this one (a rollout's Deployment,
			// pods and Events) are read in the same redraw, and a rollout's
			// stream of changes is read at most once a second: each read
			// may fetch logs through the kubelets.
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(max(settle, time.Until(read.Add(minRead)))):
			}
		case <-time.After(interval):
		}
	}
}

// settle is how long status --watch waits after a change before it reads
// the cluster again, and minRead the least time between two reads.
const (
	settle  = 100 * time.Millisecond
	minRead = time.Second
)

func inNamespace(ns string) string {
	if ns == "" {
		return ""
	}
	return " in namespace " + ns
}

func missingHint(r *status.Report) string {
	if len(r.Missing) == 0 {
		return ""
	}
	return " (not read, for lack of a right: " + r.Missing[0] + ")"
}

func newMonitorCommand(out io.Writer) *cobra.Command {
	var (
		cluster clusterFlags
		o       monitor.Options
		output  string
	)
	cmd := &cobra.Command{
		Use:   "monitor MODULE",
		Short: "Follow a module's admission decisions as they happen",
		Long: `Follow each admission decision of a module as it happens: the operation, the
object, the user, the capability and binding that decided, the verdict
(allowed, denied, mutated with its patch, warned), the message and the
latency. It reads the log of each admission pod through the API server
(pods/log, a cluster viewer's right), following new pods as they start.

The module's namespace is the one its cluster-scoped objects name — its
webhook configurations' Service, else its ClusterRoleBindings'
ServiceAccounts — never a Deployment's labels alone, which whoever may
create a Deployment may write: finding it needs list on those (or give it
with --module-namespace).

Each replica logs at most VIGIL_DECISION_LOG real decisions a second (100
unless set; 0 for none) and a quarter as many dry runs, shared fairly among
users and namespaces, and says whose it left out: monitor shows that report
as an UNLOGGED line, whatever its filters (docs/operating.md).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Module = args[0]
			if output != "text" && output != "json" {
				return fmt.Errorf("-o %q: expected text or json", output)
			}
			if err := o.Filter.Check(); err != nil {
				return err
			}
			c, err := cluster.clients()
			if err != nil {
				return err
			}
			o.Note = func(note string) { fmt.Fprintln(cmd.ErrOrStderr(), note) }
			return monitor.Follow(cmd.Context(), c.Kube, o, func(d monitor.Decision) {
				if output == "json" {
					_ = monitor.WriteJSON(out, d)
					return
				}
				monitor.Write(out, d)
			})
		},
	}
	cluster.add(cmd)
	cmd.Flags().StringVar(&o.Namespace, "module-namespace", "", "the module's namespace; when empty, the one its webhook configurations or ClusterRoleBindings name")
	cmd.Flags().StringVar(&o.Filter.Namespace, "namespace", "", "only decisions on objects in this namespace")
	cmd.Flags().StringVar(&o.Filter.Capability, "capability", "", "only decisions of this capability")
	cmd.Flags().StringVar(&o.Filter.Verdict, "verdict", "", "only decisions with this verdict: allowed, denied, mutated or warned")
	cmd.Flags().DurationVar(&o.Since, "since", 0, "also show the decisions of this long before (e.g. 10m); only new ones when 0")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text, or json (one object per line)")
	return cmd
}
