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

	"github.com/vigilkit/vigil/internal/testsupport/bench"
	"github.com/vigilkit/vigil/provenance"
	"github.com/vigilkit/vigil/vigiltest"
)

var env *vigiltest.Env

func TestMain(m *testing.M) {
	bench.FloorMain() // this binary, run again by BenchmarkUDS, as the floor server
	os.Exit(vigiltest.Run(m, vigiltest.Options{}, &env))
}

// udsCoreDir is the module these benchmarks load: UDS Core's policy engine
// as examples/uds-core ports it. The names below are that module's.
const udsCoreDir = "../../examples/uds-core"

const (
	// CapabilityName is the module's policies capability.
	CapabilityName       = "uds-core-policies"
	policyTests          = "policy-tests"
	exemptionsNamespace  = "uds-policy-exemptions"
	clusterConfigName    = "uds-cluster-config"
	operatorConfigSecret = "uds-operator-config"
	stampPolicy          = "uds-core-namespace-created-by"
)

// startUDSCoreWith installs the module as UDS Core's tests meet it (as
// examples/uds-core's tests do): its CRDs, the operator config Secret and
// the ClusterConfig in place, the gates run, the webhooks enforcing, the
// watcher running.
func startUDSCoreWith(t testing.TB, opts vigiltest.ModuleOptions) *vigiltest.Module {
	t.Helper()
	for _, f := range []string{"clusterconfig.uds.dev.yaml", "exemptions.uds.dev.yaml"} {
		data, err := os.ReadFile(filepath.Join(udsCoreDir, "testdata", "crds", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := env.InstallCRDYAML(data); err != nil {
			t.Fatal(err)
		}
	}
	cc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "uds.dev/v1alpha1", "kind": "ClusterConfig",
		"metadata": map[string]any{"name": clusterConfigName},
		"spec": map[string]any{
			"expose":     map[string]any{"domain": "uds.dev"},
			"policy":     map[string]any{"allowAllNsExemptions": false},
			"attributes": map[string]any{"clusterName": "policy-tests"},
		},
	}}
	if err := env.Client.Create(t.Context(), cc); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for _, ns := range []string{policyTests, exemptionsNamespace} {
		if err := env.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	m := env.InstallModule(t, opts)
	vouch(t, policyTests)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: operatorConfigSecret},
		StringData: map[string]string{"AUTHSERVICE_REDIS_URI": "", "KEYCLOAK_CLIENT_MODE": "AUTO"}}
	if err := env.Client.Create(t.Context(), secret); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	m.RunGates(2 * time.Minute)
	m.StartAdmission(time.Minute)
	m.StartWatcher(time.Minute)
	return m
}

// vouch marks the namespace as vouched for under the installed stamp of
// namespace creators (provenance.VouchedUnder), as an admin.
func vouch(t testing.TB, name string) {
	t.Helper()
	mapping, err := env.Client.RESTMapper().RESTMapping(schema.GroupKind{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicy"})
	if err != nil {
		t.Fatal(err)
	}
	policy := &metav1.PartialObjectMetadata{}
	policy.SetGroupVersionKind(mapping.GroupVersionKind)
	if err := env.Client.Get(t.Context(), client.ObjectKey{Name: stampPolicy}, policy); err != nil {
		t.Fatal(err)
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, provenance.VouchedUnder, policy.UID)
	if err := env.Client.Patch(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatalf("vouch for namespace %s: %v", name, err)
	}
}
