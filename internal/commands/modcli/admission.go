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
	"github.com/vigilkit/vigil/internal/roles/admissionrole"
)

func admissionCommand() *cobra.Command {
	return &cobra.Command{
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
	}
}

// AdmissionFlags are the flags of `<module> admission`.
type AdmissionFlags struct {
	Kube cmdutil.KubeFlags
	// Role holds the flags that are the role's options.
	Role admissionrole.Options
	// FailurePolicies are CAPABILITY=Fail|Ignore overrides.
	FailurePolicies []string
	// Ignored are namespaces the deployment adds to the module's ignored
	// ones (--ignore-namespace).
	Ignored []string
}

// NewAdmissionFlags returns the flags.
func NewAdmissionFlags() *AdmissionFlags { return &AdmissionFlags{} }

// AddFlags declares the flags.
func (f *AdmissionFlags) AddFlags(fs *pflag.FlagSet) {
	o := &f.Role
	fs.StringVar(&o.Addr, "addr", ":9443", "address to serve HTTPS on")
	fs.StringVar(&o.MetricsAddr, "metrics-addr", ":8080", "address to serve /metrics on, over plain HTTP; empty for none")
	fs.BoolVar(&o.Pprof, "pprof", false, "also serve Go's profiles (CPU, heap, goroutines) under /debug/pprof/ on --metrics-addr, for profiling; off by default")
	fs.StringVar(&o.CertDir, "cert-dir", "/etc/vigil/tls", "folder holding the serving certificate as tls.crt and tls.key (reloaded on change)")
	fs.StringVar(&o.CertSecret, "cert-secret", "", "manage the CA and serving certificate in this Secret of the module's namespace instead of --cert-dir: created once, shared by the replicas, renewed before expiry")
	fs.StringSliceVar(&o.CertHosts, "cert-hosts", nil, "DNS names and IPs of the managed certificate (default: the module's Service names and 127.0.0.1)")
	f.Kube.AddFlags(fs)
	fs.StringVar(&o.HandoffDir, "handoff-dir", envOr(EnvHandoffDir, DefaultHandoffDir), "folder the gates' results were written to (env VIGIL_HANDOFF_DIR)")
	fs.DurationVar(&o.ShutdownDelay, "shutdown-delay", 5*time.Second, "how long to keep serving, not ready, after SIGTERM")
	fs.BoolVar(&o.Register, "register", true, "fill the module's webhook configurations once ready (Ignore, then the canary, then the failure policy)")
	fs.StringVar(&o.WebhookURL, "webhook-url", "", "base URL the API server reaches this server at (for local runs); by default the module's Service")
	fs.DurationVar(&o.CheckInterval, "registration-check-interval", admissionrole.CheckInterval, "how often to keep the webhook configurations true: drift (edited, emptied, wrong caBundle) is repaired and reported; a deleted one is reported, not recreated")
	fs.BoolVar(&o.Bootstrap, "bootstrap", false, "create the module's empty webhook configurations when they are missing, as its manifests would: for local runs such as vigil dev")
	fs.StringVar(&o.CAFile, "ca-file", "", "CA bundle for the webhooks' caBundle with --cert-dir (default: ca.crt in --cert-dir)")
	fs.StringSliceVar(&f.FailurePolicies, "failure-policy", nil, "CAPABILITY=Fail|Ignore: a capability's failure policy instead of the module's (repeatable; Ignore is refused for a FailClosed() capability)")
	addIgnoreFlag(fs, &f.Ignored)
}

// ToOptions sets the module's failure policies and loads the client config.
func (f *AdmissionFlags) ToOptions(m *spec.Module, _ io.Writer) (*AdmissionOptions, error) {
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
	return &AdmissionOptions{Config: cfg, Module: m, Role: f.Role}, nil
}

// AdmissionOptions are a run of the module's admission role.
type AdmissionOptions struct {
	Config *rest.Config
	Module *spec.Module
	Role   admissionrole.Options
}

// Run serves until ctx ends (admissionrole.Run).
func (o *AdmissionOptions) Run(ctx context.Context) error {
	return admissionrole.Run(ctx, o.Config, o.Module, o.Role)
}
