package vigil_test

import (
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/internal/certs"
	"github.com/vigilkit/vigil/internal/testkit"
)

// bootstrapConfigs creates a module's empty webhook configurations, as its
// manifests do, and deletes them after the test.
func bootstrapConfigs(t testing.TB, name string) (*admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.ValidatingWebhookConfiguration) {
	return testkit.BootstrapConfigs(t, env.Client, name)
}

// servingDir, metricsURL and runAdmission are testkit's ServingDir,
// MetricsURL and RunAdmission: the in-process admission role of these tests.
func servingDir(t testing.TB) (*certs.CA, string) { return testkit.ServingDir(t) }

func metricsURL(addr string) string { return testkit.MetricsURL(addr) }

func runAdmission(t testing.TB, m *vigil.Module, addr string, flags ...string) (stop func()) {
	return testkit.RunAdmission(t, m, addr, flags...)
}
