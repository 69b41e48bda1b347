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
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/vigilkit/vigil/internal/admit"
	"github.com/vigilkit/vigil/internal/cli"
	"github.com/vigilkit/vigil/internal/gaterun"
	"github.com/vigilkit/vigil/internal/registration"
	"github.com/vigilkit/vigil/internal/spec"
	"github.com/vigilkit/vigil/internal/watcher"
	"github.com/vigilkit/vigil/store"
)

// Admission sets up the admission role: the module's Store, the handler of
// its bindings, its metrics, and what readiness waits for.
func (a moduleApp) Admission(ctx context.Context, cfg *rest.Config, log logr.Logger, handoffDir string) (*cli.AdmissionSetup, error) {
	m := a.m
	m.handoffDir.Store(handoffDir)
	m.mu.Lock()
	bindings := make([]spec.Binding, len(m.bindings))
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

	listersSynced := func() bool { return true }
	if users := m.listerUsers(); len(users) > 0 {
		c, synced, err := watcher.StartCache(ctx, cfg, m.name, m.scheme, users, log)
		if err != nil {
			return nil, fmt.Errorf("admission's listers: %w", err)
		}
		m.useCache(c)
		listersSynced = synced
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics, err := admit.NewMetrics(reg, m.name)
	if err != nil {
		return nil, err
	}
	configMissing := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "vigil", Subsystem: "registration", Name: "configuration_missing",
		Help:        "1 while one of the module's webhook configurations is missing (deleted, not recreated), else 0.",
		ConstLabels: prometheus.Labels{"module": m.name},
	})
	reg.MustRegister(configMissing)
	rc := &roleClients{cfg: cfg, scheme: m.scheme}
	h := admit.NewHandler(bindings, admit.Options{
		Module: m.name,
		Context: func(ctx context.Context) context.Context {
			return withModuleStore(withClients(ctx, rc), st)
		},
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
		if !listersSynced() {
			return errors.New("the listers' informers have not synced yet")
		}
		return nil
	}
	return &cli.AdmissionSetup{
		Handler: h,
		Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}),
		Ready:   ready,
		Audit:   func(ctx context.Context) error { return a.audit(ctx, cfg, log, bindings, h, metrics) },
		RegistrationProblem: func(err error) {
			if err != nil {
				configMissing.Set(1)
			} else {
				configMissing.Set(0)
			}
		},
		Registrar: func(clientConfig func(string) admissionregistrationv1.WebhookClientConfig, caBundle func() []byte) (*registration.Registrar, error) {
			return a.registrar(cfg, log, bindings, clientConfig, caBundle)
		},
	}, nil
}

// registrar is the module's webhook registration.
func (a moduleApp) registrar(cfg *rest.Config, log logr.Logger, bindings []spec.Binding, clientConfig func(string) admissionregistrationv1.WebhookClientConfig, caBundle func() []byte) (*registration.Registrar, error) {
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
		TimeoutSeconds: int32(m.timeout / time.Second), Mapper: mapper, Log: log,
	}), nil
}

// Unregister empties the module's webhook configurations and, with
// removeFinalizers, strips its finalizers from every object.
func (a moduleApp) Unregister(ctx context.Context, cfg *rest.Config, log logr.Logger, removeFinalizers bool) error {
	r, err := a.registrar(cfg, log, nil, nil, func() []byte { return nil })
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
	a.m.mu.Lock()
	for _, w := range a.m.watches {
		if w.Role == watcher.Finalize {
			kinds = append(kinds, watcher.Finalized{GVK: w.GVK, Namespaces: w.Select.Namespaces})
		}
	}
	a.m.mu.Unlock()
	c, err := client.New(cfg, client.Options{Scheme: a.m.scheme})
	if err != nil {
		return err
	}
	n, err := watcher.RemoveFinalizers(ctx, c, a.m.name, kinds)
	log.Info("finalizers removed", "objects", n)
	return err
}

// audit runs the validations registered when ready over the objects that
// exist, as if they were created now, and reports each denial as a Warning
// Event on the object, a log line and a metric: they may have been admitted
// while the webhooks were not registered. Nothing is denied or changed.
func (a moduleApp) audit(ctx context.Context, cfg *rest.Config, log logr.Logger, bindings []spec.Binding, h *admit.Handler, metrics *admit.Metrics) error {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, hc)
	if err != nil {
		return err
	}
	kinds := map[schema.GroupVersionKind][]string{}
	for _, b := range bindings {
		if b.Action == spec.Validate && !b.FailClosed {
			if _, seen := kinds[b.GVK]; !seen || len(b.Namespaces) == 0 {
				kinds[b.GVK] = b.Namespaces
			}
		}
	}
	violations := 0
	for gvk, namespaces := range kinds {
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("audit %s: %w", gvk, err)
		}
		if len(namespaces) == 0 {
			namespaces = []string{metav1.NamespaceAll}
		}
		for _, ns := range namespaces {
			list, err := dyn.Resource(mapping.Resource).Namespace(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return fmt.Errorf("audit %s in %q: %w", mapping.Resource.Resource, ns, err)
			}
			for i := range list.Items {
				obj := &list.Items[i]
				raw, err := obj.MarshalJSON()
				if err != nil {
					continue
				}
				msg := h.Audit(ctx, &admissionv1.AdmissionRequest{
					UID:       types.UID(fmt.Sprintf("audit-%s", obj.GetUID())),
					Kind:      metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
					Resource:  metav1.GroupVersionResource{Group: mapping.Resource.Group, Version: mapping.Resource.Version, Resource: mapping.Resource.Resource},
					Namespace: obj.GetNamespace(), Name: obj.GetName(), Operation: admissionv1.Create,
					Object: runtime.RawExtension{Raw: raw},
				})
				if msg == "" {
					continue
				}
				violations++
				metrics.AuditViolation()
				log.Info("audit: an existing object violates a validation; it may have been admitted before the webhooks were registered",
					"kind", gvk.Kind, "namespace", obj.GetNamespace(), "name", obj.GetName(), "violation", msg)
				recordAuditEvent(ctx, cs, a.m.name, obj, msg)
			}
		}
	}
	log.Info("audit done", "violations", violations)
	return nil
}

func recordAuditEvent(ctx context.Context, cs kubernetes.Interface, module string, obj *unstructured.Unstructured, msg string) {
	ns := obj.GetNamespace()
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	now := metav1.Now()
	_, _ = cs.CoreV1().Events(ns).Create(ctx, &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: obj.GetName() + ".", Namespace: ns},
		InvolvedObject: corev1.ObjectReference{
			APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID(),
		},
		Reason:  "AuditViolation",
		Message: fmt.Sprintf("vigil module %s: this object violates a validation and may have been admitted before the module's webhooks were registered: %s", module, msg),
		Type:    corev1.EventTypeWarning, Source: corev1.EventSource{Component: module + "-audit"},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
	}, metav1.CreateOptions{})
}
