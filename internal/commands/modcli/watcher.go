package modcli

import (
	"context"
	"io"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"

	"github.com/vigilkit/vigil/internal/commands/cmdutil"
	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/roles/watcher"
)

func watcherCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "watcher",
		Short: "Run the module's Watch, Reconcile and Finalize bindings and its schedules",
		Long: `Run the module's watches, reconciles, finalizers and schedules on shared
informers (one per type). With leader election (the default), replicas compete
for the Lease <module>-watcher in the module's namespace: exactly one runs the
bindings and schedules, the others keep their informers warm and take over
within --lease-duration of its death, or at once when it stops gracefully (the
Lease is released on SIGTERM). Serves /healthz and /readyz on --probe-addr
(ready once the informers have synced and while none has been silent past
VIGIL_WATCH_STALE_AFTER, 30s by default; live unless a restart would help)
and /metrics on --metrics-addr. With
capabilities declared FailOpenAfter, the active replica also watches for
outages of the admission replicas and fails those capabilities' webhooks open
once no replica has served for their bound.`,
	}
}

// WatcherFlags are the flags of `<module> watcher`.
type WatcherFlags struct {
	Kube cmdutil.KubeFlags
	// Role holds the flags that are the role's options.
	Role watcher.Options
	// FailurePolicies are CAPABILITY=Fail|Ignore overrides.
	FailurePolicies []string
	// Ignored are namespaces the deployment adds to the module's ignored
	// ones (--ignore-namespace), as the admission role has them.
	Ignored []string
}

// NewWatcherFlags returns the flags.
func NewWatcherFlags() *WatcherFlags { return &WatcherFlags{} }

// AddFlags declares the flags.
func (f *WatcherFlags) AddFlags(fs *pflag.FlagSet) {
	o := &f.Role
	f.Kube.AddFlags(fs)
	fs.BoolVar(&o.LeaderElection, "leader-elect", true, "run bindings and schedules only on the replica holding the module's Lease")
	fs.DurationVar(&o.LeaseDuration, "lease-duration", 15*time.Second, "how long a Lease lasts unrenewed: the longest a dead replica's work waits for another")
	fs.DurationVar(&o.RenewDeadline, "renew-deadline", 10*time.Second, "how long the active replica tries to renew before it gives up and stops")
	fs.DurationVar(&o.RetryPeriod, "retry-period", 2*time.Second, "how often replicas try to take or renew the Lease")
	fs.DurationVar(&o.ReconcileSpacing, "reconcile-spacing", 200*time.Millisecond, "least time between the starts of two reconciles of one object: changes that come faster are folded into one run")
	fs.DurationVar(&o.AuditInterval, "audit-interval", watcher.DefaultAuditInterval, "how often the active replica runs the module's validations over the existing objects and reports what they deny (it also does once the webhooks enforce)")
	fs.StringVar(&o.MetricsAddr, "metrics-addr", ":8080", "address to serve /metrics on; empty disables")
	fs.StringVar(&o.ProbeAddr, "probe-addr", ":8081", "address to serve /healthz and /readyz on; empty disables")
	fs.BoolVar(&o.Pprof, "pprof", false, "also serve Go's profiles (CPU, heap, goroutines) under /debug/pprof/ on --metrics-addr, for profiling; off by default")
	fs.DurationVar(&o.OutageCheckInterval, "outage-check-interval", 2*time.Second, "how often the active replica asks, by the registration canary, whether an admission replica serves (only with capabilities declared FailOpenAfter)")
	fs.StringSliceVar(&f.FailurePolicies, "failure-policy", nil, "CAPABILITY=Fail|Ignore: a capability's failure policy instead of the module's, as the admission role has it (repeatable)")
	addIgnoreFlag(fs, &f.Ignored)
}

// ToOptions sets the module's failure policies and loads the client config.
func (f *WatcherFlags) ToOptions(m *spec.Module, _ io.Writer) (*WatcherOptions, error) {
	if err := m.SetFailurePolicies(f.FailurePolicies); err != nil {
		return nil, err
	}
	if err := ignore(m, f.Ignored); err != nil {
		return nil, err
	}
	cfg, err := f.Kube.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	return &WatcherOptions{Config: cfg, Module: m, Role: f.Role}, nil
}

// WatcherOptions are a run of the module's watcher role.
type WatcherOptions struct {
	Config *rest.Config
	Module *spec.Module
	Role   watcher.Options
}

// Run runs the watcher until ctx ends (watcher.Run).
func (o *WatcherOptions) Run(ctx context.Context) error {
	return watcher.Run(ctx, o.Config, o.Module, o.Role)
}
