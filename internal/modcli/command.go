package modcli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"

	"github.com/vigilkit/vigil/internal/admissionrole"
	"github.com/vigilkit/vigil/internal/callctx"
	"github.com/vigilkit/vigil/internal/cmdutil"
	"github.com/vigilkit/vigil/internal/gaterun"
	"github.com/vigilkit/vigil/internal/podevents"
	"github.com/vigilkit/vigil/internal/spec"
	"github.com/vigilkit/vigil/internal/waitfor"
	"github.com/vigilkit/vigil/internal/watcher"
	"github.com/vigilkit/vigil/store"
)

// Execute runs a module binary's command line and returns its exit code.
func Execute(ctx context.Context, m *spec.Module, defErr error, args []string, out, errOut io.Writer) int {
	log := cmdutil.Logger(errOut)
	ctx = logr.NewContext(ctx, log)
	root := NewCommand(m, defErr, out, errOut)
	root.SetArgs(args)
	return cmdutil.ExitCode(errOut, root.ExecuteContext(ctx))
}

// NewCommand returns the command line of a module binary. defErr holds the
// mistakes of the module's definition: every command refuses to run with any.
func NewCommand(m *spec.Module, defErr error, out, errOut io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           m.Name,
		Short:         fmt.Sprintf("%s is a vigil module: run it in one of its roles", m.Name),
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(*cobra.Command, []string) error {
			if defErr != nil {
				return fmt.Errorf("module %s has definition mistakes:\n%w", m.Name, defErr)
			}
			return nil
		},
	}
	root.SetOut(out)
	root.SetErr(errOut)

	g := &GateOptions{Phase: -1}
	gateCmd := &cobra.Command{
		Use:   "gate --phase N",
		Short: "Run the startup gates of one phase, as the module's init container gate-phase-N does",
		Long: `Run every gate of phase N at once and exit when all required ones are done.

Exit codes: 0 done; 1 failed (a gate.Permanent error, RBAC refused, or a
definition mistake); 124 timed out (a required gate with a Timeout ran out of
time — the kubelet then restarts the init container with back-off from 10s
doubling to 5m, so prefer Optional or OnTimeout with timeouts). A required
gate without a Timeout waits without limit.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return g.Run(cmd.Context(), m) },
	}
	f := gateCmd.Flags()
	f.IntVar(&g.Phase, "phase", -1, "the phase to run (0 or more)")
	f.StringVar(&g.Kubeconfig, "kubeconfig", "", "kubeconfig file; in a pod, its ServiceAccount is used")
	f.StringVar(&g.Context, "context", "", "kubeconfig context")
	f.StringVar(&g.HandoffDir, "handoff-dir", envOr(EnvHandoffDir, DefaultHandoffDir), "folder the gates' results are written to (env VIGIL_HANDOFF_DIR)")
	f.StringVar(&g.TerminationLog, "termination-log", "/dev/termination-log", "file the phase's summary is written to, when it exists (the kubelet creates it)")
	f.DurationVar(&g.Interval, "progress-interval", 5*time.Second, "how often a waiting gate logs what it waits for")
	root.AddCommand(gateCmd)

	a := &admissionOptions{}
	admissionCmd := &cobra.Command{
		Use:   "admission",
		Short: "Serve the module's mutations and validations over HTTPS",
		Long: `Serve the module's admission webhooks: POST /mutate/<module> and
/validate/<module> (AdmissionReview v1), with /healthz and /readyz (ready once
the gates' results are handed over and the Store is synced); /metrics is
served over plain HTTP on --metrics-addr. The server bounds what clients can
make it hold — requests in flight, bodies being read, the bytes of large
bodies, the time to send headers and a body, connections — and answers what
exceeds them at once (429, 413, 408), so that the API server applies the
failure policy rather than waiting; vigil_admission_refused_total counts them. A
request for another path, or for a kind and operation no binding of its path
is for, is answered by the failure policy, unless a newer version of the
module is registered (a rollout); vigil_admission_unattributed_total counts
both.

On SIGTERM it reports itself not ready, keeps serving for --shutdown-delay while
endpoints are withdrawn, then drains the requests in flight.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.run(cmd.Context(), m) },
	}
	af := admissionCmd.Flags()
	af.StringVar(&a.Options.Addr, "addr", ":9443", "address to serve HTTPS on")
	af.StringVar(&a.Options.MetricsAddr, "metrics-addr", ":8080", "address to serve /metrics on, over plain HTTP; empty for none")
	af.BoolVar(&a.Options.Pprof, "pprof", false, "also serve Go's profiles (CPU, heap, goroutines) under /debug/pprof/ on --metrics-addr, for profiling; off by default")
	af.StringVar(&a.Options.CertDir, "cert-dir", "/etc/vigil/tls", "folder holding the serving certificate as tls.crt and tls.key (reloaded on change)")
	af.StringVar(&a.Options.CertSecret, "cert-secret", "", "manage the CA and serving certificate in this Secret of the module's namespace instead of --cert-dir: created once, shared by the replicas, renewed before expiry")
	af.StringSliceVar(&a.Options.CertHosts, "cert-hosts", nil, "DNS names and IPs of the managed certificate (default: the module's Service names and 127.0.0.1)")
	af.StringVar(&a.kubeconfig, "kubeconfig", "", "kubeconfig file; in a pod, its ServiceAccount is used")
	af.StringVar(&a.context, "context", "", "kubeconfig context")
	af.StringVar(&a.Options.HandoffDir, "handoff-dir", envOr(EnvHandoffDir, DefaultHandoffDir), "folder the gates' results were written to (env VIGIL_HANDOFF_DIR)")
	af.DurationVar(&a.Options.ShutdownDelay, "shutdown-delay", 5*time.Second, "how long to keep serving, not ready, after SIGTERM")
	af.BoolVar(&a.Options.Register, "register", true, "fill the module's webhook configurations once ready (Ignore, then the canary, then the failure policy)")
	af.StringVar(&a.Options.WebhookURL, "webhook-url", "", "base URL the API server reaches this server at (for local runs); by default the module's Service")
	af.DurationVar(&a.Options.CheckInterval, "registration-check-interval", admissionrole.CheckInterval, "how often to keep the webhook configurations true: drift (edited, emptied, wrong caBundle) is repaired and reported; a deleted one is reported, not recreated")
	af.BoolVar(&a.Options.Bootstrap, "bootstrap", false, "create the module's empty webhook configurations when they are missing, as its manifests would: for local runs such as vigil dev")
	af.StringVar(&a.Options.CAFile, "ca-file", "", "CA bundle for the webhooks' caBundle with --cert-dir (default: ca.crt in --cert-dir)")
	af.StringSliceVar(&a.policies, "failure-policy", nil, "CAPABILITY=Fail|Ignore: a capability's failure policy instead of the module's (repeatable; Ignore is refused for a FailClosed() capability)")
	root.AddCommand(admissionCmd)

	w := &watcherOptions{}
	watcherCmd := &cobra.Command{
		Use:   "watcher",
		Short: "Run the module's Watch, Reconcile and Finalize bindings and its schedules",
		Long: `Run the module's watches, reconciles, finalizers and schedules on shared
informers (one per type). With leader election (the default), replicas compete
for the Lease <module>-watcher in the module's namespace: exactly one runs the
bindings and schedules, the others keep their informers warm and take over
within --lease-duration of its death, or at once when it stops gracefully (the
Lease is released on SIGTERM). Serves /healthz and /readyz (ready once the
informers have synced) on --probe-addr and /metrics on --metrics-addr. With
capabilities declared FailOpenAfter, the active replica also watches for
outages of the admission replicas and fails those capabilities' webhooks open
once no replica has served for their bound.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := m.SetFailurePolicies(w.policies); err != nil {
				return err
			}
			cfg, err := cmdutil.LoadConfig(w.kubeconfig, w.context)
			if err != nil {
				return err
			}
			o := w.Options
			o.Log = logr.FromContextOrDiscard(cmd.Context()).WithValues("module", m.Name)
			return watcher.RunModule(cmd.Context(), cfg, m, o)
		},
	}
	wf := watcherCmd.Flags()
	wf.StringVar(&w.kubeconfig, "kubeconfig", "", "kubeconfig file; in a pod, its ServiceAccount is used")
	wf.StringVar(&w.context, "context", "", "kubeconfig context")
	wf.BoolVar(&w.Options.LeaderElection, "leader-elect", true, "run bindings and schedules only on the replica holding the module's Lease")
	wf.DurationVar(&w.Options.LeaseDuration, "lease-duration", 15*time.Second, "how long a Lease lasts unrenewed: the longest a dead replica's work waits for another")
	wf.DurationVar(&w.Options.RenewDeadline, "renew-deadline", 10*time.Second, "how long the active replica tries to renew before it gives up and stops")
	wf.DurationVar(&w.Options.RetryPeriod, "retry-period", 2*time.Second, "how often replicas try to take or renew the Lease")
	wf.DurationVar(&w.Options.ReconcileSpacing, "reconcile-spacing", 200*time.Millisecond, "least time between the starts of two reconciles of one object: changes that come faster are folded into one run")
	wf.DurationVar(&w.Options.AuditInterval, "audit-interval", watcher.DefaultAuditInterval, "how often the active replica runs the module's validations over the existing objects and reports what they deny (it also does once the webhooks enforce)")
	wf.StringVar(&w.Options.MetricsAddr, "metrics-addr", ":8080", "address to serve /metrics on; empty disables")
	wf.StringVar(&w.Options.ProbeAddr, "probe-addr", ":8081", "address to serve /healthz and /readyz on; empty disables")
	wf.DurationVar(&w.Options.OutageCheckInterval, "outage-check-interval", 2*time.Second, "how often the active replica asks, by the registration canary, whether an admission replica serves (only with capabilities declared FailOpenAfter)")
	wf.StringSliceVar(&w.policies, "failure-policy", nil, "CAPABILITY=Fail|Ignore: a capability's failure policy instead of the module's, as the admission role has it (repeatable)")
	root.AddCommand(watcherCmd)

	var unregKubeconfig, unregContext string
	var removeFinalizers, stopWatcher, deleteState bool
	var stopTimeout time.Duration
	unregister := &cobra.Command{
		Use:   "unregister",
		Short: "Empty the module's webhook configurations (and remove its finalizers), for uninstall",
		Long: `Empty the module's MutatingWebhookConfiguration and ValidatingWebhookConfiguration,
so that nothing is sent to the module any more. Replicas never do this when they
stop; run it before uninstalling.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := cmdutil.LoadConfig(unregKubeconfig, unregContext)
			if err != nil {
				return err
			}
			if stopWatcher {
				if err := StopWatcher(cmd.Context(), cfg, m, stopTimeout); err != nil {
					return err
				}
				fmt.Fprintf(out, "watcher of module %s stopped\n", m.Name)
			}
			if err := admissionrole.Unregister(cmd.Context(), cfg, m, removeFinalizers); err != nil {
				return err
			}
			fmt.Fprintf(out, "webhooks of module %s unregistered\n", m.Name)
			if removeFinalizers {
				fmt.Fprintf(out, "finalizers of module %s removed\n", m.Name)
			}
			if deleteState {
				if err := DeleteState(cmd.Context(), cfg, m); err != nil {
					return err
				}
				fmt.Fprintf(out, "state of module %s deleted\n", m.Name)
			}
			return nil
		},
	}
	unregister.Flags().StringVar(&unregKubeconfig, "kubeconfig", "", "kubeconfig file")
	unregister.Flags().StringVar(&unregContext, "context", "", "kubeconfig context")
	unregister.Flags().BoolVar(&removeFinalizers, "remove-finalizers", false, "also strip the module's finalizers from every object, so that nothing is left stuck in deletion once it is gone")
	unregister.Flags().BoolVar(&stopWatcher, "stop-watcher", false, "first scale the watcher Deployment to 0 and wait until its pods are gone, so that it adds no finalizer behind the removal (the chart's pre-delete hook does)")
	unregister.Flags().BoolVar(&deleteState, "delete-state", false, "last, delete what the module made at run time in its namespace: its Store, its serving certificate Secret and the watcher's Lease (the chart's pre-delete hook does)")
	unregister.Flags().DurationVar(&stopTimeout, "stop-watcher-timeout", 2*time.Minute, "how long --stop-watcher waits for the watcher's pods to end")
	root.AddCommand(unregister)

	co := &ChartOptions{}
	chartCmd := &cobra.Command{
		Use:   "chart -o DIR --image IMAGE",
		Short: "Write the module's Helm chart",
		Long: `Write the module's Helm chart into DIR: Chart.yaml, values.yaml,
values.schema.json, templates/ and the Store CRD in crds/ (shared by every
vigil module: Helm never deletes it). The templates are the objects manifests
prints, with the fields values drive (image, replicas, resources and
GOMEMLIMIT, scheduling, extra env and volumes, log level, the serving
certificate: managed, an existing Secret or cert-manager) turned into template
expressions; with default values the chart renders exactly what manifests
prints. A pre-delete hook stops the watcher and runs unregister
--remove-finalizers as its own ServiceAccount.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error { return co.Run(m, out) },
	}
	cf := chartCmd.Flags()
	cf.StringVarP(&co.Dir, "output-dir", "o", "", "folder to write the chart into (required)")
	cf.StringVar(&co.Image, "image", "", "the module's container image, the default of image.repository, image.tag and image.digest (required)")
	cf.BoolVar(&co.AllowDeadlock, "allow-deadlock", false, "write even when plan finds a startup deadlock")
	root.AddCommand(chartCmd)

	mf := &ManifestsOptions{}
	manifestsCmd := &cobra.Command{
		Use:   "manifests --image IMAGE",
		Short: "Print the module's Kubernetes objects, with RBAC derived from its definition",
		Long: `Print (or write into -o DIR, one file per object) everything the module needs
in a cluster, derived from its definition: Namespace, a ServiceAccount for the
admission pod and one for the watcher, Roles and ClusterRoles giving each
exactly the rules its gates, bindings, listers, Store, leader election and
registration use (see plan for why each is there), the Store CRD,
the admission Deployment with one init container per gate phase (gate-phase-N,
ascending), the watcher Deployment (every container with GOMEMLIMIT at 90% of
its memory limit), Services (the admission role's metrics among them), PodDisruptionBudgets, the
admission pods' NetworkPolicy, the empty
webhook configurations that registration fills once the module is ready, and
full ones for fail-closed capabilities. The same module and flags always print
the same bytes.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error { return mf.Run(m, out) },
	}
	mff := manifestsCmd.Flags()
	mff.StringVar(&mf.Image, "image", "", "the module's container image (required), best by digest as `vigil image --push` prints it: REPO:TAG@sha256:...")
	mff.StringVar(&mf.Namespace, "namespace", "", "namespace to deploy into (default: the module's)")
	mff.Int32Var(&mf.Replicas, "replicas", 2, "replicas of the admission and watcher Deployments")
	mff.StringVarP(&mf.Dir, "output-dir", "o", "", "write one file per object into this folder instead of printing")
	mff.StringVar(&mf.CABundleFile, "ca-bundle", "", "PEM CA bundle for the fail-closed webhook configurations (default: the module fills it in once it serves)")
	mff.BoolVar(&mf.AllowDeadlock, "allow-deadlock", false, "print even when plan finds a startup deadlock")
	mff.StringSliceVar(&mf.With, "with", nil, "other modules' `plan -o json` files, for the deadlock analysis across modules")
	mff.BoolVar(&mf.NetworkPolicy, "network-policy", true, "ship the admission pods' NetworkPolicy (webhook port from anywhere, metrics from the monitoring namespace, nothing else); false where the cluster enforces none")
	root.AddCommand(manifestsCmd)

	var planOutput string
	var planWith []string
	planCmd := &cobra.Command{
		Use:   "plan",
		Short: "Print the module's phases, init containers, webhooks, RBAC, and any startup deadlock",
		Long: `Print what the module will do: its gate phases and the init containers that
run them, its capabilities and how their webhooks are registered, its watcher,
the RBAC its manifests derive (each rule with why), and a deadlock analysis: a
gate waiting for an object one of the module's own fail-closed webhooks must
admit, a phase waiting for what only a later phase creates, or — with --with,
given other modules' ` + "`plan -o json`" + ` — modules whose gates wait on each other.
A deadlock makes plan exit 1 with the cycle spelled out.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			others, err := readOtherModules(planWith)
			if err != nil {
				return err
			}
			switch planOutput {
			case "", "text":
				if err := WritePlan(out, m); err != nil {
					return err
				}
				return writeDeadlocks(out, findDeadlocks(m, others), others)
			case "json":
				return WritePlanJSON(out, m)
			default:
				return fmt.Errorf("-o %q: expected text or json", planOutput)
			}
		},
	}
	planCmd.Flags().StringVarP(&planOutput, "output", "o", "text", "text, or json for tools (vigil dev) and for another module's --with")
	planCmd.Flags().StringSliceVar(&planWith, "with", nil, "other modules' `plan -o json` files: find deadlocks across the modules")
	root.AddCommand(planCmd)
	return root
}

// GateOptions are the options of `<module> gate`.
type GateOptions struct {
	Phase          int
	Kubeconfig     string
	Context        string
	HandoffDir     string
	TerminationLog string
	Interval       time.Duration
}

// Run runs one phase.
func (o *GateOptions) Run(ctx context.Context, m *spec.Module) error {
	if o.Phase < 0 {
		return errors.New("--phase: expected the phase to run, 0 or more, as in `gate --phase 0`")
	}
	log := logr.FromContextOrDiscard(ctx).WithValues("module", m.Name)
	cfg, err := cmdutil.LoadConfig(o.Kubeconfig, o.Context)
	if err != nil {
		return err
	}
	var gates []spec.Gate
	if p := m.Phase(o.Phase); p != nil {
		gates = p.Gates
	}
	termination := o.TerminationLog
	if _, err := os.Stat(termination); err != nil && termination == "/dev/termination-log" {
		termination = "" // not in a pod: the kubelet creates it
	}
	opts := gaterun.Options{Log: log, Interval: o.Interval, HandoffDir: o.HandoffDir, TerminationLog: termination}
	if sink := podevents.For(cfg, m.Name, o.Phase); sink != nil {
		opts.Events = sink
	}
	for _, g := range gates {
		if g.Sample == nil {
			if opts.Waiter, err = waitfor.New(cfg, log); err != nil {
				return err
			}
			break
		}
	}
	// Gate callbacks get the Store lazily: a module whose gates never use it
	// needs neither its CRD nor its RBAC to pass them.
	st := store.NewLazy(ctx, cfg, store.Options{Namespace: m.Namespace, Name: m.Name, Logger: log})
	calls := &callctx.Role{Config: cfg, Scheme: m.Scheme, Module: st, Scope: func(capability string) store.Store { return st.Scope(capability) }}
	opts.Store = st
	opts.Context = func(ctx context.Context) context.Context { return callctx.With(ctx, calls, st) }
	_, err = gaterun.RunPhase(ctx, o.Phase, gates, opts)
	return err
}

// admissionOptions are the flags of `<module> admission`.
type admissionOptions struct {
	admissionrole.Options
	kubeconfig, context string
	policies            []string
}

func (a *admissionOptions) run(ctx context.Context, m *spec.Module) error {
	if err := m.SetFailurePolicies(a.policies); err != nil {
		return err
	}
	cfg, err := cmdutil.LoadConfig(a.kubeconfig, a.context)
	if err != nil {
		return err
	}
	return admissionrole.Run(ctx, cfg, m, a.Options)
}

// watcherOptions are the flags of `<module> watcher`.
type watcherOptions struct {
	watcher.Options
	kubeconfig, context string
	policies            []string
}

// EnvHandoffDir names the folder gates hand their results over in.
const EnvHandoffDir = "VIGIL_HANDOFF_DIR"

// DefaultHandoffDir is the handoff folder in a module's pods: an emptyDir
// shared by its init containers and its main container.
const DefaultHandoffDir = "/var/run/vigil"

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
