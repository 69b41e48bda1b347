package vigil_test

import (
	"context"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/internal/serving/certs"
	"github.com/vigilkit/vigil/internal/testsupport/testkit"
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

// fewRights makes users who may only create, get, update and patch
// Namespaces and Pods (a tenant's rights, cluster-wide), and returns a
// client of each, in order; what it creates is removed when the test ends.
func fewRights(t *testing.T, name string, users ...string) []client.Client {
	t.Helper()
	cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name + "-few"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"namespaces", "pods"}, Verbs: []string{"create", "get", "update", "patch"},
	}}}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-few"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: cr.Name},
	}
	for _, u := range users {
		crb.Subjects = append(crb.Subjects, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: u})
	}
	for _, o := range []client.Object{cr, crb} {
		if err := env.Client.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
	var out []client.Client
	for _, u := range users {
		c, err := client.New(env.AsUserConfig(u), client.Options{Scheme: env.Scheme})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	return out
}
