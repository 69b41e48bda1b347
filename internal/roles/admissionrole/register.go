package admissionrole

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/runtime/events"
	"github.com/vigilkit/vigil/internal/runtime/finalizers"
	"github.com/vigilkit/vigil/internal/runtime/podevents"
	"github.com/vigilkit/vigil/internal/runtime/served"
	"github.com/vigilkit/vigil/internal/serving/registration"
)

// clientConfig says how the API server reaches the module: a URL for local
// runs, otherwise the module's Service.
func clientConfig(m *spec.Module, webhookURL string) func(path string) admissionregistrationv1.WebhookClientConfig {
	return func(path string) admissionregistrationv1.WebhookClientConfig {
		if webhookURL != "" {
			u := strings.TrimSuffix(webhookURL, "/") + path
			return admissionregistrationv1.WebhookClientConfig{URL: &u}
		}
		return admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{
			Namespace: m.Namespace, Name: m.Name, Path: &path, Port: ptr.To[int32](443),
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
	// A replica that starts into drifted configurations (edited, a wrong
	// caBundle) reports it, and its repair; the empty configurations of a
	// first registration are no drift.
	reg.OnDrift(func(drift []string) {
		if !registration.FirstRegistration(drift) {
			problems.drifted(drift)
		}
	})
	backoff := wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.3, Steps: 1 << 30, Cap: 30 * time.Second}
	for {
		// Readiness is polled briskly: registration should follow it closely.
		next := 250 * time.Millisecond
		if err := ready(); err == nil {
			// The Lease first: a registration is never without one, which
			// would let an older version take it over.
			if err := reg.RenewLease(ctx); err != nil {
				log.Error(err, "admission Lease: an older version may take the registration over")
			}
			began := time.Now()
			err = reg.Register(ctx)
			if err == nil {
				if drift := problems.pending(); len(drift) > 0 {
					problems.repaired(drift, time.Since(began))
				}
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

// CheckInterval is how often a replica keeps its configurations true when
// no other is configured: two GETs (one per configuration) each time, so the
// module's rights on them stay get and patch. Drift is repaired within the
// interval plus the repair itself (30–40 ms through the API server,
// including the canary): 1.1–2.0 s end to end in the drift tests. A watch
// field-selected on metadata.name would see drift in milliseconds, and RBAC
// does narrow such a list or watch by resourceNames, but it adds two verbs
// on those objects for a gain of about two seconds.
const CheckInterval = 2 * time.Second

// watchRegistration keeps the configurations true to the module's spec
// every interval (registration.Registrar.Sync): drift — webhooks edited,
// emptied, a wrong caBundle — is reported and repaired; a configuration
// deleted outright is reported and not recreated (an admin may have meant
// it, and the module has no right to create one); a newer version's
// registration is left to it.
func watchRegistration(ctx context.Context, log logr.Logger, reg *registration.Registrar, problems *registrationProblems, every time.Duration) {
	if every <= 0 {
		every = CheckInterval
	}
	reg.OnDrift(problems.drifted)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		began := time.Now()
		drift, err := reg.Sync(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, registration.ErrMissing):
			problems.report(err)
		case errors.Is(err, registration.ErrNewer):
			// A newer version owns the registration: nothing of this
			// replica's to keep or report.
			problems.clear()
			problems.settled()
		case err != nil:
			// Still wrong: the drift stays reported until a repair holds.
			log.Error(err, "keep the webhook configurations true; retrying")
		default:
			problems.clear()
			if len(drift) > 0 {
				problems.repaired(drift, time.Since(began))
			} else {
				problems.settled()
			}
		}
	}
}

// registrationMetrics count repairs and show drift, and a registration
// that cannot finish, while they last.
type registrationMetrics struct {
	repairs prometheus.Counter
	drifted prometheus.Gauge
	stuck   prometheus.Gauge
}

func newRegistrationMetrics(reg prometheus.Registerer, module string) *registrationMetrics {
	m := &registrationMetrics{
		repairs: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "vigil", Subsystem: "registration", Name: "repairs_total",
			Help:        "Repairs of the module's webhook configurations after they drifted from its spec (edited, emptied, wrong caBundle).",
			ConstLabels: prometheus.Labels{"module": module},
		}),
		drifted: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "vigil", Subsystem: "registration", Name: "drifted",
			Help:        "1 while the module's webhook configurations differ from its spec and are not repaired yet, else 0.",
			ConstLabels: prometheus.Labels{"module": module},
		}),
	}
	m.stuck = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "vigil", Subsystem: "registration", Name: "stuck",
		Help:        "1 while the registration cannot finish: its canary has not reached the module (refused by another admission control, or unanswered), else 0.",
		ConstLabels: prometheus.Labels{"module": module},
	})
	reg.MustRegister(m.repairs, m.drifted, m.stuck)
	return m
}

// registrationProblems reports what is wrong with the configurations: a
// missing one once per occurrence, each drift and its repair — in the log
// (named events), as an Event on the pod, in /readyz's detail while wrong,
// and to metrics.
type registrationProblems struct {
	log     logr.Logger
	sink    podevents.Sink
	notify  func(error)
	metrics *registrationMetrics

	mu    sync.Mutex
	err   error
	drift []string
	// stuckBy says why the registration cannot finish, while it cannot.
	stuckBy error
}

// stuck is told that the registration's canary has not reached the module
// (problem says why), and that it has again (nil).
func (p *registrationProblems) stuck(problem error) {
	p.mu.Lock()
	p.stuckBy = problem
	p.mu.Unlock()
	if p.metrics != nil {
		p.metrics.stuck.Set(map[bool]float64{true: 1, false: 0}[problem != nil])
	}
	if problem == nil {
		events.Info(p.log, events.CanaryReached, "the registration's canary reaches the module again")
		return
	}
	if p.sink != nil {
		p.sink.Event(true, "RegistrationStuck", "the registration cannot finish: "+problem.Error())
	}
}

func (p *registrationProblems) report(err error) {
	p.mu.Lock()
	first := p.err == nil
	p.err = err
	p.mu.Unlock()
	if !first {
		return
	}
	events.Info(p.log, events.WebhookConfigurationMissing, "webhook configuration missing; not recreated: re-apply the module's manifests, or unregister it on purpose", "err", err.Error())
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

// drifted is told what differs, before the repair is written.
func (p *registrationProblems) drifted(drift []string) {
	p.mu.Lock()
	p.drift = drift
	p.mu.Unlock()
	msg := "webhook configurations drifted from the module's spec; repairing: " + strings.Join(drift, " | ")
	events.Info(p.log, events.WebhooksDrifted, msg, "drift", drift)
	if p.metrics != nil {
		p.metrics.drifted.Set(1)
	}
	if p.sink != nil {
		go p.sink.Event(true, "WebhookConfigurationDrifted", msg)
	}
}

// repaired is told that a drift was written back.
func (p *registrationProblems) repaired(drift []string, took time.Duration) {
	p.settled()
	msg := fmt.Sprintf("webhook configurations repaired in %s: %s", took.Round(time.Millisecond), strings.Join(drift, " | "))
	events.Info(p.log, events.WebhooksRepaired, msg, "drift", drift, "took", took.String())
	if p.metrics != nil {
		p.metrics.repairs.Inc()
	}
	if p.sink != nil {
		p.sink.Event(true, "WebhookConfigurationRepaired", msg)
	}
}

// pending is the drift reported and not repaired yet.
func (p *registrationProblems) pending() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.drift
}

// settled: the configurations are as specified (or a newer version's).
func (p *registrationProblems) settled() {
	p.mu.Lock()
	p.drift = nil
	p.mu.Unlock()
	if p.metrics != nil {
		p.metrics.drifted.Set(0)
	}
}

func (p *registrationProblems) detail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	if p.err != nil {
		out = append(out, "warning: "+p.err.Error())
	}
	if p.stuckBy != nil {
		out = append(out, "warning: the registration cannot finish: "+p.stuckBy.Error())
	}
	if len(p.drift) > 0 {
		out = append(out, "warning: webhook configurations drifted from the module's spec, not repaired yet: "+strings.Join(p.drift, " | "))
	}
	return strings.Join(out, "\n")
}

// bootstrapConfigurations creates the module's empty webhook configurations
// when they are missing, and its opt-out guards, as its manifests install
// them.
func bootstrapConfigurations(ctx context.Context, cfg *rest.Config, cluster served.Cluster, m *spec.Module) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	module := m.Name
	mut, val := registration.Bootstrap(module)
	if _, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, mut, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("--bootstrap: create MutatingWebhookConfiguration %s: %w", module, err)
	}
	if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, val, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("--bootstrap: create ValidatingWebhookConfiguration %s: %w", module, err)
	}
	if err := registration.EnsurePolicies(ctx, cs, cluster, m); err != nil {
		return fmt.Errorf("--bootstrap: %w", err)
	}
	return nil
}

// newRegistrar is the module's webhook registration; with verify, it first
// makes sure what the webhooks exclude is exactly the objects the gates wait
// for (registration.VerifyExclusions).
func newRegistrar(cfg *rest.Config, m *spec.Module, verify bool, log logr.Logger, clientConfig func(string) admissionregistrationv1.WebhookClientConfig, caBundle func() []byte) (*registration.Registrar, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, hc)
	if err != nil {
		return nil, err
	}
	if verify {
		if err := registration.VerifyExclusions(mapper, m); err != nil {
			return nil, err
		}
	}
	return registration.New(cs, registration.Options{
		Module: m.Name, Namespace: m.Namespace, Ignored: m.IgnoredNamespaces, Version: m.Version, Bindings: m.Bindings, Gated: registration.GatedObjects(m),
		ClientConfig: clientConfig, CABundle: caBundle, FailurePolicy: m.FailurePolicy, Policies: m.Policies(),
		TimeoutSeconds: m.TimeoutSeconds, Mapper: mapper, Log: log,
	}), nil
}

// Unregister empties the module's webhook configurations and, with
// removeFinalizers, strips its finalizers from every object: `<module>
// unregister`, for uninstall.
func Unregister(ctx context.Context, cfg *rest.Config, m *spec.Module, removeFinalizers bool) error {
	log := logr.FromContextOrDiscard(ctx)
	unbound := *m
	unbound.Bindings = nil
	r, err := newRegistrar(cfg, &unbound, false, log, nil, func() []byte { return nil })
	if err != nil {
		return err
	}
	if err := r.Unregister(ctx); err != nil {
		return err
	}
	if !removeFinalizers {
		return nil
	}
	// New objects would get the finalizers again from the module's policies
	// (registration.FinalizerStamps) with no watcher left to release them:
	// those policies go first.
	if err := unbindFinalizerStamps(ctx, cfg, m); err != nil {
		return err
	}
	var kinds []finalizers.Finalized
	for _, w := range m.Watches {
		if w.Role == spec.RoleFinalize {
			kinds = append(kinds, finalizers.Finalized{GVK: w.GVK, Namespaces: w.Select.Namespaces})
		}
	}
	c, err := client.New(cfg, client.Options{Scheme: m.Scheme})
	if err != nil {
		return err
	}
	n, err := finalizers.RemoveFinalizers(ctx, c, m.Name, kinds)
	log.Info("finalizers removed", "objects", n)
	return err
}

// unbindFinalizerStamps deletes the bindings of the module's finalizer
// policies, where the cluster serves them.
func unbindFinalizerStamps(ctx context.Context, cfg *rest.Config, m *spec.Module) error {
	stamps := registration.FinalizerStamps(m)
	if len(stamps) == 0 {
		return nil
	}
	cluster, err := served.DiscoverConfig(ctx, cfg)
	if err != nil {
		return err
	}
	if cluster.Version(served.MutatingAdmissionPolicy) == "" {
		return nil
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	api, err := registration.NewStampAPI(cs, cluster, "Finalize")
	if err != nil {
		return err
	}
	for _, st := range stamps {
		b, err := api.GetBinding(ctx, st.Binding.Name)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("unregister: read MutatingAdmissionPolicyBinding %s: %w", st.Binding.Name, err)
		}
		if err := api.Delete(ctx, registration.StampBindings, b.Name, b.UID); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("unregister: delete MutatingAdmissionPolicyBinding %s, which puts finalizers on new objects: %w", b.Name, err)
		}
	}
	return nil
}
