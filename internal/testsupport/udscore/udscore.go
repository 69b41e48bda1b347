package udscore

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/provenance"
	"github.com/vigilkit/vigil/vigiltest"
)

// The names of the module examples/uds-core declares, and of what it reads.
const (
	// Namespace is the module's namespace, UDS Core's.
	Namespace = "pepr-system"
	// Capability is the module's policies capability.
	Capability = "uds-core-policies"
	// PolicyTests is the namespace UDS Core's policy tests run in.
	PolicyTests = "policy-tests"
	// ExemptionsNamespace holds the Exemptions the module honours.
	ExemptionsNamespace = "uds-policy-exemptions"
	// ClusterConfig is the ClusterConfig its gates wait for.
	ClusterConfig = "uds-cluster-config"
	// OperatorConfigSecret is the Secret its admission container mounts.
	OperatorConfigSecret = "uds-operator-config"
	// StampPolicy is the MutatingAdmissionPolicy that stamps who created
	// a Namespace (vigil.NamespaceProvenance).
	StampPolicy = "uds-core-namespace-created-by"
)

// Install installs the module in dir (examples/uds-core) as UDS Core's tests
// meet it: its CRDs (from dir's testdata), the ClusterConfig, the policy
// tests' and the Exemptions' namespaces, the module from its manifests
// with the policy tests' namespace vouched for, the operator config Secret,
// and its gates run. Its admission and watcher are the caller's to start.
func Install(t testing.TB, env *vigiltest.Env, dir string, opts vigiltest.ModuleOptions) *vigiltest.Module {
	t.Helper()
	for _, f := range []string{"clusterconfig.uds.dev.yaml", "exemptions.uds.dev.yaml"} {
		data, err := os.ReadFile(filepath.Join(dir, "testdata", "crds", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := env.InstallCRDYAML(data); err != nil {
			t.Fatal(err)
		}
	}
	cc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "uds.dev/v1alpha1", "kind": "ClusterConfig",
		"metadata": map[string]any{"name": ClusterConfig},
		"spec": map[string]any{
			"expose":     map[string]any{"domain": "uds.dev"},
			"policy":     map[string]any{"allowAllNsExemptions": false},
			"attributes": map[string]any{"clusterName": "policy-tests"},
		},
	}}
	if err := env.Client.Create(t.Context(), cc); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for _, ns := range []string{PolicyTests, ExemptionsNamespace} {
		if err := env.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	if opts.Dir == "" {
		opts.Dir = dir
	}
	m := env.InstallModule(t, opts)
	Vouch(t, env, PolicyTests)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: OperatorConfigSecret},
		StringData: map[string]string{"AUTHSERVICE_REDIS_URI": "", "KEYCLOAK_CLIENT_MODE": "AUTO"}}
	if err := env.Client.Create(t.Context(), secret); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	m.RunGates(2 * time.Minute)
	return m
}

// Vouch marks the namespace as vouched for under the installed stamp of
// namespace creators (provenance.VouchedUnder), as an admin.
func Vouch(t testing.TB, env *vigiltest.Env, name string) {
	t.Helper()
	mapping, err := env.Client.RESTMapper().RESTMapping(schema.GroupKind{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicy"})
	if err != nil {
		t.Fatal(err)
	}
	policy := &metav1.PartialObjectMetadata{}
	policy.SetGroupVersionKind(mapping.GroupVersionKind)
	if err := env.Client.Get(t.Context(), client.ObjectKey{Name: StampPolicy}, policy); err != nil {
		t.Fatal(err)
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, provenance.VouchedUnder, policy.UID)
	if err := env.Client.Patch(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatalf("vouch for namespace %s: %v", name, err)
	}
}
