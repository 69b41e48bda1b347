package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vigilkit/vigil/vigiltest"
)

// probe is a Probe of UDS Core's test (makeProbe) with the module given.
func probe(name, namespace, module string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "monitoring.coreos.com/v1", "kind": "Probe",
		"metadata": map[string]any{"name": name, "namespace": namespace},
		"spec": map[string]any{
			"module":  module,
			"prober":  map[string]any{"url": "prometheus-blackbox-exporter.monitoring.svc.cluster.local:9115"},
			"targets": map[string]any{"staticConfig": map[string]any{"static": []any{"https://app.uds.dev/"}}},
		},
	}}
}

// UDS Core's probe validator tests (test/vitest/pepr-policies/probe.spec.ts,
// describe "probe validator"), each subtest named after its it(...). The
// module starts without the Probe CRD — its other webhooks are registered
// regardless — and the Probe validation joins them once the CRD (the
// stand-in in testdata/crds/stub) is served.
func TestProbeValidator(t *testing.T) {
	m := startUDSCore(t)
	if _, err := env.Clientset.Discovery().ServerResourcesForGroupVersion("monitoring.coreos.com/v1"); err == nil {
		t.Log("a Probe CRD is served already")
	}
	data, err := os.ReadFile(filepath.Join("testdata", "crds", "stub", "probes.monitoring.coreos.com.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := env.InstallCRDYAML(data); err != nil {
		t.Fatal(err)
	}
	vigiltest.Eventually(t, 30*time.Second, func() error {
		val, err := env.Clientset.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(t.Context(), m.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, w := range val.Webhooks {
			for _, r := range w.Rules {
				if strings.Join(r.Resources, ",") == "probes" {
					return nil
				}
			}
		}
		return fmt.Errorf("no webhook of %s has a rule for probes yet", m.Name)
	})

	t.Run("should deny a probe that references an SSO module owned by a different namespace", func(t *testing.T) {
		p := probe("probe-cross-ns", PolicyTests, "http_200x_sso_other-namespace_victim-client-probe")
		var err error
		vigiltest.Eventually(t, 10*time.Second, func() error {
			try := p.DeepCopy()
			if err = env.Client.Create(t.Context(), try); err == nil {
				_ = env.Client.Delete(t.Context(), try)
				return fmt.Errorf("admitted: the API server does not call the new rule yet")
			}
			return nil
		})
		denied(t, "a Probe of another namespace's SSO module", err, "Probe is not authorized to use this Blackbox Exporter module")
	})
	t.Run("should deny a probe with a bare http_200x_sso module (no namespace segment)", func(t *testing.T) {
		denied(t, "a Probe of the bare SSO module", apply(t, probe("probe-bare-sso", PolicyTests, "http_200x_sso")),
			"Probe is not authorized to use this Blackbox Exporter module")
	})
	t.Run("should allow a probe with a module scoped to its own namespace", func(t *testing.T) {
		if err := apply(t, probe("probe-correct-ns", PolicyTests, "http_200x_sso_policy-tests_uds-app-probe")); err != nil {
			t.Errorf("a Probe of its own namespace's SSO module: %v, want it admitted", err)
		}
	})
	t.Run("should allow a probe using the standard http_2xx module", func(t *testing.T) {
		if err := apply(t, probe("probe-standard", PolicyTests, "http_2xx")); err != nil {
			t.Errorf("a Probe of the standard module: %v, want it admitted", err)
		}
	})
}
