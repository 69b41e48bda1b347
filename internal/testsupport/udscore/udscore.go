package udscore

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

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
	InstallCRDs(t, env, dir)
	if err := env.Client.Create(t.Context(), ClusterConfigObject(false)); err != nil && !apierrors.IsAlreadyExists(err) {
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
	policy, err := StampMeta(t.Context(), env)
	if err != nil {
		t.Fatal(err)
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, provenance.VouchedUnder, policy.UID)
	if err := env.Client.Patch(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatalf("vouch for namespace %s: %v", name, err)
	}
}

// InstallCRDs installs UDS Core's CRDs from dir's testdata (vigil's own
// schemas of UDS Core's kinds), as its CRD chart does before the policy
// engine starts.
func InstallCRDs(t testing.TB, env *vigiltest.Env, dir string) {
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
}

// ClusterConfigObject is the ClusterConfig the module's gates wait for,
// with the fields UDS Core's CRD requires.
func ClusterConfigObject(allowAllNsExemptions bool) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "uds.dev/v1alpha1", "kind": "ClusterConfig",
		"metadata": map[string]any{"name": ClusterConfig},
		"spec": map[string]any{
			"expose":     map[string]any{"domain": "uds.dev"},
			"policy":     map[string]any{"allowAllNsExemptions": allowAllNsExemptions},
			"attributes": map[string]any{"clusterName": "policy-tests"},
		},
	}}
}

// StampMeta is the metadata of the installed stamp of namespace creators,
// read in the version of MutatingAdmissionPolicy the API server serves: an
// error that apierrors.IsNotFound tells when it is not installed.
func StampMeta(ctx context.Context, env *vigiltest.Env) (*metav1.PartialObjectMetadata, error) {
	mapping, err := env.Client.RESTMapper().RESTMapping(schema.GroupKind{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicy"})
	if err != nil {
		return nil, err
	}
	policy := &metav1.PartialObjectMetadata{}
	policy.SetGroupVersionKind(mapping.GroupVersionKind)
	return policy, env.Client.Get(ctx, client.ObjectKey{Name: StampPolicy}, policy)
}

// servicePolicies are the policies an Exemption applies to Services.
var servicePolicies = []string{"RestrictExternalNames", "DisallowNodePortServices"}

// PodPolicies are the policies an Exemption applies to Pods: every policy
// the Exemption CRD in dir's testdata names (which examples/uds-core's
// tests hold to the port's), less those of Services.
func PodPolicies(t testing.TB, dir string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "testdata", "crds", "exemptions.uds.dev.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(data, crd); err != nil {
		t.Fatal(err)
	}
	var policies []string
	for _, v := range crd.Spec.Versions {
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		entry := v.Schema.OpenAPIV3Schema.Properties["spec"].Properties["exemptions"].Items.Schema
		for _, e := range entry.Properties["policies"].Items.Schema.Enum {
			var p string
			if err := json.Unmarshal(e.Raw, &p); err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(servicePolicies, p) && !slices.Contains(policies, p) {
				policies = append(policies, p)
			}
		}
	}
	if len(policies) == 0 {
		t.Fatalf("%s: no policies in spec.exemptions[].policies' enum", filepath.Join(dir, "testdata", "crds", "exemptions.uds.dev.yaml"))
	}
	return policies
}
