package admission

import (
	"fmt"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/internal/testsupport/testkit"
)

// kubeconfig is an admin's kubeconfig file of the control plane.
func kubeconfig(t *testing.T) string { return env.KubeConfigFile(t) }

// newClient is an admin's client of the control plane.
func newClient(t testing.TB) client.Client { return testkit.NewClient(t, env) }

// applyObjects applies objects with server-side apply as an admin, for real
// or as a dry run.
func applyObjects(t *testing.T, objs []*unstructured.Unstructured, dryRun bool) {
	t.Helper()
	testkit.ApplyObjects(t, env, objs, dryRun)
}

// serveAdmission runs the module's admission role on a free loopback port
// and registers its paths in namespaces (testkit.ServeAdmission).
func serveAdmission(t *testing.T, m *vigil.Module, module string, namespaces []string, flags ...string) *testkit.Served {
	return testkit.ServeAdmission(t, env, m, module, namespaces, flags...)
}

// bootstrapConfigs creates a module's empty webhook configurations, as its
// manifests do, and deletes them after the test.
func bootstrapConfigs(t testing.TB, name string) (*admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.ValidatingWebhookConfiguration) {
	return testkit.BootstrapConfigs(t, env.Client, name)
}

// fewRights makes users with a tenant's rights on Namespaces and Pods.
func fewRights(t *testing.T, name string, users ...string) []client.Client {
	return testkit.FewRights(t, env, name, users...)
}

// tenant makes user a tenant who may create, get and delete resource (of
// group) in namespaces, and nothing else; it returns her client.
func tenant(t *testing.T, user, group, resource string, namespaces ...string) client.Client {
	t.Helper()
	return testkit.Tenant(t, env, user, group, resource, namespaces...)
}

// crdYAML is a namespaced CRD serving kind of group at v1 under plural,
// whose objects hold anything.
func crdYAML(group, kind, plural, singular string) string {
	return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: %[3]s.%[1]s
spec:
  group: %[1]s
  scope: Namespaced
  names: {plural: %[3]s, singular: %[4]s, kind: %[2]s, listKind: %[2]sList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`, group, kind, plural, singular)
}
