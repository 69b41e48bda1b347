package admissionrole

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/vigilkit/vigil/internal/podevents"
	"github.com/vigilkit/vigil/internal/registration"
	"github.com/vigilkit/vigil/internal/spec"
	"github.com/vigilkit/vigil/internal/watcher"
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
	sink   podevents.Sink
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

// bootstrapConfigurations creates the module's empty webhook configurations
// when they are missing, and its opt-out guards, as its manifests install
// them.
func bootstrapConfigurations(ctx context.Context, cfg *rest.Config, m *spec.Module) error {
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
	if err := registration.EnsureGuards(ctx, cs, m); err != nil {
		return fmt.Errorf("--bootstrap: %w", err)
	}
	return nil
}

// newRegistrar is the module's webhook registration.
func newRegistrar(cfg *rest.Config, m *spec.Module, log logr.Logger, clientConfig func(string) admissionregistrationv1.WebhookClientConfig, caBundle func() []byte) (*registration.Registrar, error) {
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
	return registration.New(cs, registration.Options{
		Module: m.Name, Namespace: m.Namespace, Version: m.Version, Bindings: m.Bindings, Gated: registration.GatedObjects(m),
		ClientConfig: clientConfig, CABundle: caBundle, FailurePolicy: m.FailurePolicy,
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
	r, err := newRegistrar(cfg, &unbound, log, nil, func() []byte { return nil })
	if err != nil {
		return err
	}
	if err := r.Unregister(ctx); err != nil {
		return err
	}
	if !removeFinalizers {
		return nil
	}
	var kinds []watcher.Finalized
	for _, w := range m.Watches {
		if w.Role == spec.RoleFinalize {
			kinds = append(kinds, watcher.Finalized{GVK: w.GVK, Namespaces: w.Select.Namespaces})
		}
	}
	c, err := client.New(cfg, client.Options{Scheme: m.Scheme})
	if err != nil {
		return err
	}
	n, err := watcher.RemoveFinalizers(ctx, c, m.Name, kinds)
	log.Info("finalizers removed", "objects", n)
	return err
}
