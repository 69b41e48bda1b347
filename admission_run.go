package vigil

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/cli"
	"github.com/vigilkit/vigil/internal/gaterun"
	"github.com/vigilkit/vigil/internal/registration"
	"github.com/vigilkit/vigil/store"
)

// Admission sets up the admission role: the module's Store, the handler of
// its bindings, its metrics, and what readiness waits for.
func (a moduleApp) Admission(ctx context.Context, cfg *rest.Config, log logr.Logger, handoffDir string) (*cli.AdmissionSetup, error) {
	m := a.m
	m.mu.Lock()
	bindings := make([]admission.Binding, len(m.bindings))
	for i, b := range m.bindings {
		bindings[i] = b.Binding
	}
	gateNames := make([]string, 0, len(m.gates))
	for _, g := range m.gates {
		gateNames = append(gateNames, g.id())
	}
	m.mu.Unlock()

	st, err := store.New(cfg, store.Options{Namespace: m.namespace, Name: m.name, Logger: log})
	if err != nil {
		return nil, err
	}
	if err := st.Start(ctx); err != nil {
		return nil, fmt.Errorf("admission needs the module's Store: %w", err)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics, err := admission.NewMetrics(reg, m.name)
	if err != nil {
		return nil, err
	}
	var canaries sync.Map
	h := admission.NewHandler(bindings, admission.Options{
		OnCanary:      func(token string) { canaries.Store(token, true) },
		Module:        m.name,
		FailurePolicy: m.policy,
		Timeout:       m.timeout - 2*time.Second,
		Metrics:       metrics,
		Log:           log,
		Store: func(capability string) store.Store {
			if capability == "" {
				return st
			}
			return st.Scope(capability)
		},
	})
	ready := func() error {
		var missing []string
		for _, g := range gateNames {
			if _, err := os.Stat(gaterun.HandoffPath(handoffDir, g)); err != nil {
				missing = append(missing, g)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("the results of gates %v are not in %s yet: their init containers have not run", missing, handoffDir)
		}
		if !st.Synced() {
			return errors.New("the Store is not synced yet")
		}
		return nil
	}
	return &cli.AdmissionSetup{
		Handler: h,
		Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}),
		Ready:   ready,
		Registrar: func(clientConfig func(string) admissionregistrationv1.WebhookClientConfig, caBundle func() []byte) (*registration.Registrar, error) {
			return a.registrar(cfg, log, bindings, clientConfig, caBundle, func(token string) bool {
				_, ok := canaries.Load(token)
				return ok
			})
		},
	}, nil
}

// registrar is the module's webhook registration.
func (a moduleApp) registrar(cfg *rest.Config, log logr.Logger, bindings []admission.Binding, clientConfig func(string) admissionregistrationv1.WebhookClientConfig, caBundle func() []byte, canarySeen func(string) bool) (*registration.Registrar, error) {
	m := a.m
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
	m.mu.Lock()
	var gated []registration.Object
	for _, g := range m.gates {
		if g.sample == nil {
			gated = append(gated, registration.Object{GVK: g.spec.GVK, Namespace: g.spec.Namespace, Name: g.spec.Name})
		}
	}
	m.mu.Unlock()
	return registration.New(cs, registration.Options{
		Module: m.name, Namespace: m.namespace, Version: m.version, Bindings: bindings, Gated: gated,
		ClientConfig: clientConfig, CABundle: caBundle, FailurePolicy: m.policy,
		TimeoutSeconds: int32(m.timeout / time.Second), Mapper: mapper, CanarySeen: canarySeen, Log: log,
	}), nil
}

// Unregister empties the module's webhook configurations.
func (a moduleApp) Unregister(ctx context.Context, cfg *rest.Config, log logr.Logger) error {
	r, err := a.registrar(cfg, log, nil, nil, func() []byte { return nil }, nil)
	if err != nil {
		return err
	}
	return r.Unregister(ctx)
}
