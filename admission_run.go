package vigil

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/rest"

	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/cli"
	"github.com/vigilkit/vigil/internal/gaterun"
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
	h := admission.NewHandler(bindings, admission.Options{
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
	}, nil
}
