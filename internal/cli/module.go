package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/vigilkit/vigil/internal/certs"
	"github.com/vigilkit/vigil/internal/deadlock"
	"github.com/vigilkit/vigil/internal/gaterun"
	"github.com/vigilkit/vigil/internal/manifests"
	"github.com/vigilkit/vigil/internal/registration"
	"github.com/vigilkit/vigil/internal/webhook"
)

// Module is what a module binary's command line needs of the module.
type Module interface {
	Name() string
	Namespace() string
	Validate() error
	Plan() []PlanPhase
	Capabilities() []PlanCapability
	Watching() PlanWatcher
	Deployment() manifests.Module
	PhaseGates(ctx context.Context, cfg *rest.Config, log logr.Logger, phase int) ([]gaterun.Gate, error)
	Admission(ctx context.Context, cfg *rest.Config, log logr.Logger, handoffDir string) (*AdmissionSetup, error)
	Watcher(ctx context.Context, cfg *rest.Config, log logr.Logger, o WatcherOptions) error
	Unregister(ctx context.Context, cfg *rest.Config, log logr.Logger, removeFinalizers bool) error
}

// WatcherOptions are the options of `<module> watcher`.
type WatcherOptions struct {
	Kubeconfig     string
	Context        string
	LeaderElection bool
	LeaseDuration  time.Duration
	RenewDeadline  time.Duration
	RetryPeriod    time.Duration
	MetricsAddr    string
	ProbeAddr      string
	// ReconcileSpacing is the least time between two reconciles of one object.
	ReconcileSpacing time.Duration
}

// AdmissionSetup is what the admission role serves.
type AdmissionSetup struct {
	// Handler serves the admission paths.
	Handler http.Handler
	// Metrics serves Prometheus metrics.
	Metrics http.Handler
	// Ready reports what the module still waits for before it may serve.
	Ready func() error
	// Registrar registers the module's webhooks, reached as clientConfig says
	// and trusted through caBundle.
	Registrar func(clientConfig func(path string) admissionregistrationv1.WebhookClientConfig, caBundle func() []byte) (*registration.Registrar, error)
	// Audit runs the validations over the objects that exist, after
	// registration, and reports what passed unchecked before it.
	Audit func(ctx context.Context) error
	// RegistrationProblem is told of a registration problem an operator must
	// see (a configuration deleted), or nil when it is gone; it feeds metrics.
	RegistrationProblem func(err error)
}

// PlanPhase is one phase of a module's gates, as `plan` prints it.
type PlanPhase struct {
	Phase int
	Gates []PlanGate
}

// PlanCapability is one capability, as `plan` prints it.
type PlanCapability struct {
	Name       string `json:"name"`
	FailClosed bool   `json:"failClosed"`
	// FailurePolicy is the webhooks' policy once enforced.
	FailurePolicy string   `json:"failurePolicy"`
	Namespaces    []string `json:"namespaces"`
	// Bindings say what each binding admits, e.g. "validate Pod CREATE".
	Bindings []string `json:"bindings"`
}

// PlanWatcher is what the watcher role runs, as `plan` prints it.
type PlanWatcher struct {
	// Bindings say what each Watch, Reconcile and Finalize does.
	Bindings []string `json:"bindings"`
	// Schedules say when each schedule runs.
	Schedules []string `json:"schedules"`
	// Informers say, per type, what its shared informer selects.
	Informers []string `json:"informers"`
}

// PlanGate is one gate, as `plan` prints it.
type PlanGate struct {
	Name     string        `json:"name"`
	WaitsFor string        `json:"waitsFor"`
	Timeout  time.Duration `json:"timeout"`
	Optional bool          `json:"optional"`
	Fallback bool          `json:"fallback"`
	Site     string        `json:"site"`
}

// InitContainerName is the init container that runs a phase's gates.
func InitContainerName(phase int) string { return fmt.Sprintf("gate-phase-%d", phase) }

// ExecuteModule runs a module binary's command line and returns its exit code.
func ExecuteModule(ctx context.Context, m Module, args []string, out, errOut io.Writer) int {
	log := logr.FromSlogHandler(slog.NewTextHandler(errOut, &slog.HandlerOptions{Level: slog.LevelInfo}))
	setGlobalLoggers(log)
	ctx = logr.NewContext(ctx, log)
	root := NewModuleCommand(m, out, errOut)
	root.SetArgs(args)
	return exitCode(errOut, root.ExecuteContext(ctx))
}

// NewModuleCommand returns the command line of a module binary.
func NewModuleCommand(m Module, out, errOut io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           m.Name(),
		Short:         fmt.Sprintf("%s is a vigil module: run it in one of its roles", m.Name()),
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(*cobra.Command, []string) error {
			if err := m.Validate(); err != nil {
				return fmt.Errorf("module %s has definition mistakes:\n%w", m.Name(), err)
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
		RunE: func(cmd *cobra.Command, _ []string) error { return g.Run(cmd.Context(), m, out) },
	}
	f := gateCmd.Flags()
	f.IntVar(&g.Phase, "phase", -1, "the phase to run (0 or more)")
	f.StringVar(&g.Kubeconfig, "kubeconfig", "", "kubeconfig file; in a pod, its ServiceAccount is used")
	f.StringVar(&g.Context, "context", "", "kubeconfig context")
	f.StringVar(&g.HandoffDir, "handoff-dir", envOr("VIGIL_HANDOFF_DIR", "/var/run/vigil"), "folder the gates' results are written to (env VIGIL_HANDOFF_DIR)")
	f.StringVar(&g.TerminationLog, "termination-log", "/dev/termination-log", "file the phase's summary is written to, when it exists (the kubelet creates it)")
	f.DurationVar(&g.Interval, "progress-interval", 5*time.Second, "how often a waiting gate logs what it waits for")
	root.AddCommand(gateCmd)

	a := &AdmissionOptions{}
	admissionCmd := &cobra.Command{
		Use:   "admission",
		Short: "Serve the module's mutations and validations over HTTPS",
		Long: `Serve the module's admission webhooks: POST /mutate/<module> and
/validate/<module> (AdmissionReview v1), with /healthz, /readyz (ready once the
gates' results are handed over and the Store is synced) and /metrics.

On SIGTERM it reports itself not ready, keeps serving for --shutdown-delay while
endpoints are withdrawn, then drains the requests in flight.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.Run(cmd.Context(), m) },
	}
	af := admissionCmd.Flags()
	af.StringVar(&a.Addr, "addr", ":9443", "address to serve HTTPS on")
	af.StringVar(&a.CertDir, "cert-dir", "/etc/vigil/tls", "folder holding the serving certificate as tls.crt and tls.key (reloaded on change)")
	af.StringVar(&a.CertSecret, "cert-secret", "", "manage the CA and serving certificate in this Secret of the module's namespace instead of --cert-dir: created once, shared by the replicas, renewed before expiry")
	af.StringSliceVar(&a.CertHosts, "cert-hosts", nil, "DNS names and IPs of the managed certificate (default: the module's Service names and 127.0.0.1)")
	af.StringVar(&a.Kubeconfig, "kubeconfig", "", "kubeconfig file; in a pod, its ServiceAccount is used")
	af.StringVar(&a.Context, "context", "", "kubeconfig context")
	af.StringVar(&a.HandoffDir, "handoff-dir", envOr("VIGIL_HANDOFF_DIR", "/var/run/vigil"), "folder the gates' results were written to (env VIGIL_HANDOFF_DIR)")
	af.DurationVar(&a.ShutdownDelay, "shutdown-delay", 5*time.Second, "how long to keep serving, not ready, after SIGTERM")
	af.BoolVar(&a.Register, "register", true, "fill the module's webhook configurations once ready (Ignore, then the canary, then the failure policy)")
	af.StringVar(&a.WebhookURL, "webhook-url", "", "base URL the API server reaches this server at (for local runs); by default the module's Service")
	af.DurationVar(&a.CheckInterval, "registration-check-interval", 30*time.Second, "how often to check that the webhook configurations still exist (a deleted one is reported, not recreated)")
	af.BoolVar(&a.Bootstrap, "bootstrap", false, "create the module's empty webhook configurations when they are missing, as its manifests would: for local runs such as vigil dev")
	af.StringVar(&a.CAFile, "ca-file", "", "CA bundle for the webhooks' caBundle with --cert-dir (default: ca.crt in --cert-dir)")
	root.AddCommand(admissionCmd)

	w := &WatcherOptions{}
	watcherCmd := &cobra.Command{
		Use:   "watcher",
		Short: "Run the module's Watch, Reconcile and Finalize bindings and its schedules",
		Long: `Run the module's watches, reconciles, finalizers and schedules on shared
informers (one per type). With leader election (the default), replicas compete
for the Lease <module>-watcher in the module's namespace: exactly one runs the
bindings and schedules, the others keep their informers warm and take over
within --lease-duration of its death, or at once when it stops gracefully (the
Lease is released on SIGTERM). Serves /healthz and /readyz (ready once the
informers have synced) on --probe-addr and /metrics on --metrics-addr.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := LoadConfig(w.Kubeconfig, w.Context)
			if err != nil {
				return err
			}
			return m.Watcher(cmd.Context(), cfg, logr.FromContextOrDiscard(cmd.Context()).WithValues("module", m.Name()), *w)
		},
	}
	wf := watcherCmd.Flags()
	wf.StringVar(&w.Kubeconfig, "kubeconfig", "", "kubeconfig file; in a pod, its ServiceAccount is used")
	wf.StringVar(&w.Context, "context", "", "kubeconfig context")
	wf.BoolVar(&w.LeaderElection, "leader-elect", true, "run bindings and schedules only on the replica holding the module's Lease")
	wf.DurationVar(&w.LeaseDuration, "lease-duration", 15*time.Second, "how long a Lease lasts unrenewed: the longest a dead replica's work waits for another")
	wf.DurationVar(&w.RenewDeadline, "renew-deadline", 10*time.Second, "how long the active replica tries to renew before it gives up and stops")
	wf.DurationVar(&w.RetryPeriod, "retry-period", 2*time.Second, "how often replicas try to take or renew the Lease")
	wf.DurationVar(&w.ReconcileSpacing, "reconcile-spacing", 200*time.Millisecond, "least time between the starts of two reconciles of one object: changes that come faster are folded into one run")
	wf.StringVar(&w.MetricsAddr, "metrics-addr", ":8080", "address to serve /metrics on; empty disables")
	wf.StringVar(&w.ProbeAddr, "probe-addr", ":8081", "address to serve /healthz and /readyz on; empty disables")
	root.AddCommand(watcherCmd)

	var unregKubeconfig, unregContext string
	var removeFinalizers bool
	unregister := &cobra.Command{
		Use:   "unregister",
		Short: "Empty the module's webhook configurations (and remove its finalizers), for uninstall",
		Long: `Empty the module's MutatingWebhookConfiguration and ValidatingWebhookConfiguration,
so that nothing is sent to the module any more. Replicas never do this when they
stop; run it before uninstalling.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := LoadConfig(unregKubeconfig, unregContext)
			if err != nil {
				return err
			}
			if err := m.Unregister(cmd.Context(), cfg, logr.FromContextOrDiscard(cmd.Context()), removeFinalizers); err != nil {
				return err
			}
			fmt.Fprintf(out, "webhooks of module %s unregistered\n", m.Name())
			if removeFinalizers {
				fmt.Fprintf(out, "finalizers of module %s removed\n", m.Name())
			}
			return nil
		},
	}
	unregister.Flags().StringVar(&unregKubeconfig, "kubeconfig", "", "kubeconfig file")
	unregister.Flags().StringVar(&unregContext, "context", "", "kubeconfig context")
	unregister.Flags().BoolVar(&removeFinalizers, "remove-finalizers", false, "also strip the module's finalizers from every object, so that nothing is left stuck in deletion once it is gone")
	root.AddCommand(unregister)

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
ascending), the watcher Deployment, Services, PodDisruptionBudgets, the empty
webhook configurations that registration fills once the module is ready, and
full ones for fail-closed capabilities. The same module and flags always print
the same bytes.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error { return mf.Run(m, out) },
	}
	mff := manifestsCmd.Flags()
	mff.StringVar(&mf.Image, "image", "", "the module's container image (required)")
	mff.StringVar(&mf.Namespace, "namespace", "", "namespace to deploy into (default: the module's)")
	mff.Int32Var(&mf.Replicas, "replicas", 2, "replicas of the admission and watcher Deployments")
	mff.StringVarP(&mf.Dir, "output-dir", "o", "", "write one file per object into this folder instead of printing")
	mff.StringVar(&mf.CABundleFile, "ca-bundle", "", "PEM CA bundle for the fail-closed webhook configurations (default: the module fills it in once it serves)")
	mff.BoolVar(&mf.AllowDeadlock, "allow-deadlock", false, "print even when plan finds a startup deadlock")
	mff.StringSliceVar(&mf.With, "with", nil, "other modules' `plan -o json` files, for the deadlock analysis across modules")
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
func (o *GateOptions) Run(ctx context.Context, m Module, out io.Writer) error {
	if o.Phase < 0 {
		return errors.New("--phase: expected the phase to run, 0 or more, as in `gate --phase 0`")
	}
	log := logr.FromContextOrDiscard(ctx).WithValues("module", m.Name())
	cfg, err := LoadConfig(o.Kubeconfig, o.Context)
	if err != nil {
		return err
	}
	gates, err := m.PhaseGates(ctx, cfg, log, o.Phase)
	if err != nil {
		return err
	}
	termination := o.TerminationLog
	if _, err := os.Stat(termination); err != nil && termination == "/dev/termination-log" {
		termination = "" // not in a pod: the kubelet creates it
	}
	opts := gaterun.Options{Log: log, Interval: o.Interval, HandoffDir: o.HandoffDir, TerminationLog: termination}
	if sink := podEvents(cfg, m.Name(), o.Phase); sink != nil {
		opts.Events = sink
	}
	_, err = gaterun.RunPhase(ctx, o.Phase, gates, opts)
	return err
}

// AdmissionOptions are the options of `<module> admission`.
type AdmissionOptions struct {
	Addr       string
	CertDir    string
	CertSecret string
	CertHosts  []string
	Register   bool
	WebhookURL string
	CAFile     string
	// Bootstrap creates the empty webhook configurations when missing.
	Bootstrap bool
	// CheckInterval is how often a replica checks its configurations still
	// exist; 30s when zero.
	CheckInterval time.Duration
	Kubeconfig    string
	Context       string
	HandoffDir    string
	ShutdownDelay time.Duration
	// Listening, when set, is told the address the server listens on.
	Listening func(addr string)
}

// Run serves until ctx ends.
func (o *AdmissionOptions) Run(ctx context.Context, m Module) error {
	log := logr.FromContextOrDiscard(ctx).WithValues("module", m.Name())
	cfg, err := LoadConfig(o.Kubeconfig, o.Context)
	if err != nil {
		return err
	}
	setup, err := m.Admission(ctx, cfg, log, o.HandoffDir)
	if err != nil {
		return err
	}
	serve := webhook.Options{
		Addr:          o.Addr,
		CertFile:      filepath.Join(o.CertDir, "tls.crt"),
		KeyFile:       filepath.Join(o.CertDir, "tls.key"),
		Handler:       setup.Handler,
		Metrics:       setup.Metrics,
		Ready:         setup.Ready,
		ShutdownDelay: o.ShutdownDelay,
		Listening:     o.Listening,
		Log:           log,
	}
	caBundle := func() []byte {
		path := o.CAFile
		if path == "" {
			path = filepath.Join(o.CertDir, "ca.crt")
		}
		data, _ := os.ReadFile(path)
		return data
	}
	if o.CertSecret != "" {
		hosts := o.CertHosts
		if len(hosts) == 0 {
			svc := m.Name() + "." + m.Namespace() + ".svc"
			hosts = []string{svc, svc + ".cluster.local", "127.0.0.1"}
		}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return err
		}
		mgr := certs.NewSecretManager(cs, certs.SecretOptions{Namespace: m.Namespace(), Name: o.CertSecret, Hosts: hosts, Log: log})
		if err := mgr.Ensure(ctx); err != nil {
			return err
		}
		go mgr.Run(ctx, time.Minute)
		serve.GetCertificate = mgr.GetCertificate
		caBundle = mgr.CABundle
	}
	listening := make(chan struct{})
	serve.Listening = func(addr string) {
		close(listening)
		if o.Listening != nil {
			o.Listening(addr)
		}
	}
	if o.Bootstrap {
		if err := bootstrapConfigurations(ctx, cfg, m.Name()); err != nil {
			return err
		}
	}
	if o.Register {
		reg, err := setup.Registrar(o.clientConfig(m), caBundle)
		if err != nil {
			return err
		}
		problems := &registrationProblems{log: log, sink: podEvents(cfg, m.Name(), -1), notify: setup.RegistrationProblem}
		serve.ReadyDetail = problems.detail
		go func() {
			select {
			case <-ctx.Done():
				return
			case <-listening:
			}
			if err := reg.InjectCABundle(ctx); err != nil {
				log.Error(err, "fail-closed webhook configurations: put the serving CA in")
			}
			registered := registerWhenReady(ctx, log, listening, setup.Ready, reg, problems)
			if registered && setup.Audit != nil {
				if err := setup.Audit(ctx); err != nil {
					log.Error(err, "audit of the objects admitted before registration")
				}
			}
			watchRegistration(ctx, reg, problems, o.CheckInterval)
		}()
	}
	return webhook.Serve(ctx, serve)
}

// clientConfig says how the API server reaches the module: a URL for local
// runs, otherwise the module's Service.
func (o *AdmissionOptions) clientConfig(m Module) func(path string) admissionregistrationv1.WebhookClientConfig {
	return func(path string) admissionregistrationv1.WebhookClientConfig {
		if o.WebhookURL != "" {
			u := strings.TrimSuffix(o.WebhookURL, "/") + path
			return admissionregistrationv1.WebhookClientConfig{URL: &u}
		}
		return admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{
			Namespace: m.Namespace(), Name: m.Name(), Path: &path, Port: ptr.To[int32](443),
		}}
	}
}

// registerWhenReady registers once the server listens and is ready, retrying
// what can be retried. It reports whether this replica registered.
func registerWhenReady(ctx context.Context, log logr.Logger, listening <-chan struct{}, ready func() error, reg *registration.Registrar, problems *registrationProblems) bool {
	select {
	case <-ctx.Done():
		return false
	case <-listening:
	}
	backoff := wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.3, Steps: 1 << 30, Cap: 30 * time.Second}
	for {
		// Readiness is polled briskly: registration should follow it closely.
		next := 250 * time.Millisecond
		if err := ready(); err == nil {
			err = reg.Register(ctx)
			if err == nil {
				return true
			}
			if errors.Is(err, registration.ErrMissing) {
				problems.report(err)
				return false
			}
			if errors.Is(err, registration.ErrNewer) {
				log.Info("webhooks not registered by this replica", "reason", err.Error())
				return false
			}
			log.Error(err, "register webhooks; retrying")
			next = backoff.Step()
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(next):
		}
	}
}

// watchRegistration checks now and then that the configurations still exist,
// and reports when one is deleted (it is not recreated: an admin may have
// meant it).
func watchRegistration(ctx context.Context, reg *registration.Registrar, problems *registrationProblems, every time.Duration) {
	if every <= 0 {
		every = 30 * time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := reg.Check(ctx)
		switch {
		case errors.Is(err, registration.ErrMissing):
			problems.report(err)
		case err == nil:
			problems.clear()
		}
	}
}

// registrationProblems reports a missing configuration once per occurrence:
// in the log, as an Event on the pod, in /readyz's detail, and to metrics.
type registrationProblems struct {
	log    logr.Logger
	sink   gaterun.EventSink
	notify func(error)

	mu  sync.Mutex
	err error
}

func (p *registrationProblems) report(err error) {
	p.mu.Lock()
	first := p.err == nil
	p.err = err
	p.mu.Unlock()
	if !first {
		return
	}
	p.log.Error(err, "webhook configuration missing; not recreated: re-apply the module's manifests, or unregister it on purpose")
	if p.sink != nil {
		p.sink.Event(true, "WebhookConfigurationMissing", err.Error())
	}
	if p.notify != nil {
		p.notify(err)
	}
}

func (p *registrationProblems) clear() {
	p.mu.Lock()
	had := p.err != nil
	p.err = nil
	p.mu.Unlock()
	if had && p.notify != nil {
		p.notify(nil)
	}
}

func (p *registrationProblems) detail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err == nil {
		return ""
	}
	return "warning: " + p.err.Error()
}

// LoadConfig loads a client config the way kubectl does (flag, KUBECONFIG,
// ~/.kube/config), falling back to the pod's ServiceAccount, with client-side
// rate limits set deliberately rather than client-go's 5 QPS.
func LoadConfig(kubeconfig, context string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w (set --kubeconfig or KUBECONFIG, or run in a pod)", err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	return cfg, nil
}

// podEvents records Events on the pod named by the downward API, when it is;
// phase is the gate phase whose init container records them, or -1.
func podEvents(cfg *rest.Config, module string, phase int) gaterun.EventSink {
	name, ns := os.Getenv("POD_NAME"), os.Getenv("POD_NAMESPACE")
	if name == "" || ns == "" {
		return nil
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil
	}
	ref := corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Name: name, Namespace: ns, UID: types.UID(os.Getenv("POD_UID"))}
	source := module + "-admission"
	if phase >= 0 {
		ref.FieldPath = fmt.Sprintf("spec.initContainers{%s}", InitContainerName(phase))
		source = module + "-gate"
	}
	return &eventSink{cs: cs, pod: ref, source: source}
}

// eventSink writes each Event synchronously: gates record few (changes of
// state only) and the last one, written just before the process exits, must
// not be lost in an asynchronous queue.
type eventSink struct {
	cs     kubernetes.Interface
	pod    corev1.ObjectReference
	source string
}

func (e *eventSink) Event(warning bool, reason, message string) {
	typ := corev1.EventTypeNormal
	if warning {
		typ = corev1.EventTypeWarning
	}
	now := metav1.Now()
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: e.pod.Name + ".", Namespace: e.pod.Namespace},
		InvolvedObject: e.pod,
		Reason:         reason,
		Message:        message,
		Type:           typ,
		Source:         corev1.EventSource{Component: e.source},
		FirstTimestamp: now,
		LastTimestamp:  now,
		Count:          1,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = e.cs.CoreV1().Events(e.pod.Namespace).Create(ctx, ev, metav1.CreateOptions{})
}

// WritePlan prints a module's phases and gates.
func WritePlan(out io.Writer, m Module) error {
	phases := m.Plan()
	fmt.Fprintf(out, "module %s (namespace %s)\n", m.Name(), m.Namespace())
	if len(phases) == 0 {
		fmt.Fprintln(out, "\nno startup gates: the deployment gets no gate init containers")
		if err := writeCapabilities(out, m.Capabilities()); err != nil {
			return err
		}
		if err := writeWatcher(out, m.Watching()); err != nil {
			return err
		}
		return writeRBAC(out, m.Deployment())
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	for _, p := range phases {
		fmt.Fprintf(tw, "\nphase %d\tinit container %s: gate --phase %d\n", p.Phase, InitContainerName(p.Phase), p.Phase)
		for _, g := range p.Gates {
			var how []string
			if g.Optional {
				how = append(how, "optional")
			} else {
				how = append(how, "required")
			}
			if g.Timeout > 0 {
				how = append(how, "timeout "+g.Timeout.String())
			} else {
				how = append(how, "no timeout")
			}
			if g.Fallback {
				how = append(how, "fallback on timeout")
			}
			fmt.Fprintf(tw, "  %s\t%s\t[%s]\t%s\n", g.Name, g.WaitsFor, strings.Join(how, ", "), g.Site)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(out, "\ninit containers, in order:")
	for _, p := range phases {
		fmt.Fprintf(out, "  %s\n", InitContainerName(p.Phase))
	}
	if err := writeCapabilities(out, m.Capabilities()); err != nil {
		return err
	}
	if err := writeWatcher(out, m.Watching()); err != nil {
		return err
	}
	return writeRBAC(out, m.Deployment())
}

// writeRBAC prints every rule the module's ServiceAccount gets, and why.
func writeRBAC(out io.Writer, d manifests.Module) error {
	rules := manifests.Rules(&d)
	if len(rules) == 0 {
		return nil
	}
	fmt.Fprintf(out, "\nRBAC, derived (`manifests` renders it) for the ServiceAccounts of namespace %s:\n", d.Namespace)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  SERVICEACCOUNT\tSCOPE\tVERBS\tRESOURCE\tNAMES\tWHY")
	for _, r := range rules {
		scope := "cluster"
		if r.Namespace != "" {
			scope = r.Namespace
		}
		res := strings.Join(r.Resources, ",")
		if g := strings.Join(r.APIGroups, ","); g != "" {
			res += "." + g
		}
		names := strings.Join(r.ResourceNames, ",")
		if names == "" {
			names = "-"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", manifests.ServiceAccount(d.Name, r.Role), scope, strings.Join(r.Verbs, ","), res, names, r.Why)
	}
	return tw.Flush()
}

func writeWatcher(out io.Writer, w PlanWatcher) error {
	if len(w.Bindings) == 0 && len(w.Schedules) == 0 && len(w.Informers) == 0 {
		return nil
	}
	fmt.Fprintln(out, "\nwatcher (one active replica, by leader election):")
	for _, b := range w.Bindings {
		fmt.Fprintf(out, "  %s\n", b)
	}
	for _, s := range w.Schedules {
		fmt.Fprintf(out, "  schedule %s\n", s)
	}
	if len(w.Informers) > 0 {
		fmt.Fprintln(out, "  shared informers (one per type, for watches and listers):")
		for _, i := range w.Informers {
			fmt.Fprintf(out, "    %s\n", i)
		}
	}
	return nil
}

func writeCapabilities(out io.Writer, caps []PlanCapability) error {
	if len(caps) == 0 {
		return nil
	}
	fmt.Fprintln(out, "\ncapabilities:")
	for _, c := range caps {
		where := "cluster-wide"
		if len(c.Namespaces) > 0 {
			where = "in " + strings.Join(c.Namespaces, ", ")
		}
		if c.FailClosed {
			fmt.Fprintf(out, "  %s (%s): fail-closed: static webhooks with failurePolicy Fail from install on; nothing passes unchecked\n", c.Name, where)
		} else {
			fmt.Fprintf(out, "  %s (%s): registered when ready (failurePolicy Ignore until the canary proves the API server reaches the module, then %s); until then these pass unchecked (the audit after registration reports them):\n", c.Name, where, c.FailurePolicy)
		}
		for _, b := range c.Bindings {
			fmt.Fprintf(out, "    %s\n", b)
		}
	}
	return nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// bootstrapConfigurations creates the module's empty webhook configurations
// when they are missing, as its manifests install them.
func bootstrapConfigurations(ctx context.Context, cfg *rest.Config, module string) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	mut, val := registration.Bootstrap(module)
	if _, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, mut, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("--bootstrap: create MutatingWebhookConfiguration %s: %w", module, err)
	}
	if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, val, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("--bootstrap: create ValidatingWebhookConfiguration %s: %w", module, err)
	}
	return nil
}

// PlanJSON is `plan -o json`: the module's roles as tools read them.
type PlanJSON struct {
	Module       string           `json:"module"`
	Namespace    string           `json:"namespace"`
	Phases       []PlanPhaseJSON  `json:"phases"`
	Capabilities []PlanCapability `json:"capabilities"`
	Watcher      PlanWatcher      `json:"watcher"`
	// Deadlock is what the deadlock analysis needs of the module, for
	// `plan --with` of another module.
	Deadlock deadlock.Module `json:"deadlock"`
}

// PlanPhaseJSON is one phase in `plan -o json`.
type PlanPhaseJSON struct {
	Phase         int        `json:"phase"`
	InitContainer string     `json:"initContainer"`
	Gates         []PlanGate `json:"gates"`
}

// WritePlanJSON writes the plan as JSON.
func WritePlanJSON(out io.Writer, m Module) error {
	p := PlanJSON{Module: m.Name(), Namespace: m.Namespace(), Phases: []PlanPhaseJSON{}, Capabilities: m.Capabilities(), Watcher: m.Watching(), Deadlock: deadlockModule(m.Deployment())}
	for _, ph := range m.Plan() {
		p.Phases = append(p.Phases, PlanPhaseJSON{Phase: ph.Phase, InitContainer: InitContainerName(ph.Phase), Gates: ph.Gates})
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(p)
}

// ManifestsOptions are the options of `<module> manifests`.
type ManifestsOptions struct {
	Image         string
	Namespace     string
	Replicas      int32
	Dir           string
	CABundleFile  string
	AllowDeadlock bool
	With          []string
}

// Run renders the module's objects.
func (o *ManifestsOptions) Run(m Module, out io.Writer) error {
	opts := manifests.Options{Image: o.Image, Namespace: o.Namespace, Replicas: o.Replicas}
	if o.CABundleFile != "" {
		data, err := os.ReadFile(o.CABundleFile)
		if err != nil {
			return fmt.Errorf("--ca-bundle: %w", err)
		}
		opts.CABundle = data
	}
	if o.Replicas < 1 {
		return fmt.Errorf("--replicas %d: expected 1 or more (2 keeps the webhooks up through a node's loss)", o.Replicas)
	}
	others, err := readOtherModules(o.With)
	if err != nil {
		return err
	}
	if cycles := findDeadlocks(m, others); len(cycles) > 0 && !o.AllowDeadlock {
		var b strings.Builder
		_ = writeDeadlocks(&b, cycles, others)
		return fmt.Errorf("%w: refusing to print manifests that would never become ready (--allow-deadlock prints them anyway):%s", ErrDeadlock, strings.TrimRight(b.String(), "\n"))
	}
	objs, err := manifests.Render(m.Deployment(), opts)
	if err != nil {
		return err
	}
	if o.Dir == "" {
		data, err := manifests.YAML(objs)
		if err != nil {
			return err
		}
		_, err = out.Write(data)
		return err
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return err
	}
	for i, obj := range objs {
		data, err := manifests.YAML(objs[i : i+1])
		if err != nil {
			return err
		}
		path := filepath.Join(o.Dir, manifests.FileName(i, obj))
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return err
		}
		fmt.Fprintln(out, path)
	}
	return nil
}
