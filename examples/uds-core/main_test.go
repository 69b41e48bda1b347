package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
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

var env *vigiltest.Env

func TestMain(m *testing.M) {
	os.Exit(vigiltest.Run(m, vigiltest.Options{}, &env))
}

// PolicyTests is the namespace UDS Core's policy tests create their
// objects in.
const PolicyTests = "policy-tests"

// EnvCRDs names a folder of UDS Core's own CRD files
// (clusterconfig.uds.dev.yaml, exemptions.uds.dev.yaml) for the tests to
// install instead of vigil's schemas of the same kinds in testdata/crds.
const EnvCRDs = "UDS_CORE_CRDS"

// crdDir is the folder of the CRD files the tests install: $UDS_CORE_CRDS,
// or testdata/crds, vigil's own schemas written from the fields UDS Core
// documents. The project copies no file of UDS Core's.
func crdDir(t testing.TB) string {
	t.Helper()
	if d := os.Getenv(EnvCRDs); d != "" {
		if _, err := os.Stat(filepath.Join(d, "exemptions.uds.dev.yaml")); err != nil {
			t.Fatalf("%s=%s: expected a folder holding clusterconfig.uds.dev.yaml and exemptions.uds.dev.yaml, got %v; unset it to use testdata/crds", EnvCRDs, d, err)
		}
		return d
	}
	return filepath.Join("testdata", "crds")
}

var installCRDs sync.Mutex

// udsCRDs installs UDS Core's CRDs, as its CRD chart does before the
// policy engine starts.
func udsCRDs(t testing.TB) {
	t.Helper()
	installCRDs.Lock()
	defer installCRDs.Unlock()
	dir := crdDir(t)
	for _, f := range []string{"clusterconfig.uds.dev.yaml", "exemptions.uds.dev.yaml"} {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := env.InstallCRDYAML(data); err != nil {
			t.Fatal(err)
		}
	}
}

// clusterConfig is a ClusterConfig uds-cluster-config with the fields UDS
// Core's CRD requires.
func clusterConfig(allowAllNsExemptions bool) *unstructured.Unstructured {
	cc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "uds.dev/v1alpha1", "kind": "ClusterConfig",
		"metadata": map[string]any{"name": ClusterConfigName},
		"spec": map[string]any{
			"expose":     map[string]any{"domain": "uds.dev"},
			"policy":     map[string]any{"allowAllNsExemptions": allowAllNsExemptions},
			"attributes": map[string]any{"clusterName": "policy-tests"},
		},
	}}
	return cc
}

// namespace creates the namespace unless it exists, as an admin, and —
// the module installed — vouches for it, as an admin does for a namespace
// from before the install: the namespaces persist from test to test, and
// each test's install stamps namespace creators anew.
func namespace(t testing.TB, name string) {
	t.Helper()
	err := env.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	vouch(t, name)
}

// stampPolicy is the module's MutatingAdmissionPolicy that stamps namespace
// creators.
const stampPolicy = "uds-core-namespace-created-by"

// stampMeta is the metadata of the installed stamp of namespace creators,
// read in the version of MutatingAdmissionPolicy the API server serves (v1
// from Kubernetes 1.36; v1beta1 or v1alpha1 where enabled before): an
// error that apierrors.IsNotFound tells when it is not installed.
func stampMeta(ctx context.Context) (*metav1.PartialObjectMetadata, error) {
	mapping, err := env.Client.RESTMapper().RESTMapping(schema.GroupKind{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicy"})
	if err != nil {
		return nil, err
	}
	policy := &metav1.PartialObjectMetadata{}
	policy.SetGroupVersionKind(mapping.GroupVersionKind)
	return policy, env.Client.Get(ctx, client.ObjectKey{Name: stampPolicy}, policy)
}

// vouch marks the namespace as vouched for under the installed stamp of
// namespace creators (provenance.VouchedUnder), as an admin (group
// system:masters); without an install it does nothing.
func vouch(t testing.TB, name string) {
	t.Helper()
	policy, err := stampMeta(t.Context())
	if apierrors.IsNotFound(err) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, provenance.VouchedUnder, policy.UID)
	if err := env.Client.Patch(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatalf("vouch for namespace %s: %v", name, err)
	}
}

// startUDSCore installs the module as UDS Core's tests meet it: its CRDs,
// the operator config Secret and the ClusterConfig in place, the gates run,
// the webhooks enforcing, the watcher running; the namespaces
// policy-tests and uds-policy-exemptions exist.
func startUDSCore(t testing.TB) *vigiltest.Module {
	t.Helper()
	return startUDSCoreWith(t, vigiltest.ModuleOptions{Dir: "."})
}

// startUDSCoreWith is startUDSCore with the module's options.
func startUDSCoreWith(t testing.TB, opts vigiltest.ModuleOptions) *vigiltest.Module {
	t.Helper()
	udsCRDs(t)
	cc := clusterConfig(false)
	if err := env.Client.Create(t.Context(), cc); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	namespace(t, PolicyTests)
	namespace(t, ExemptionsNamespace)
	m := env.InstallModule(t, opts)
	vouch(t, PolicyTests)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: OperatorConfigSecret},
		StringData: map[string]string{"AUTHSERVICE_REDIS_URI": "", "KEYCLOAK_CLIENT_MODE": "AUTO"}}
	if err := env.Client.Create(t.Context(), secret); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	m.RunGates(2 * time.Minute)
	m.StartAdmission(time.Minute)
	m.StartWatcher(time.Minute)
	return m
}

// apply creates obj as UDS Core's tests apply it (a new object: its
// create is what admission judges), and removes it when the test ends.
func apply(t *testing.T, obj client.Object) error {
	t.Helper()
	err := env.Client.Create(t.Context(), obj)
	if err == nil {
		t.Cleanup(func() {
			_ = env.Client.Delete(context.Background(), obj, client.GracePeriodSeconds(0))
		})
	}
	return err
}

// denied fails the test unless err is a denial whose message contains
// want, as UDS Core's tests match with expect.stringContaining.
func denied(t *testing.T, what string, err error, want string) {
	t.Helper()
	var status apierrors.APIStatus
	if err == nil {
		t.Errorf("%s was admitted; want it denied with %q", what, want)
		return
	}
	if !errors.As(err, &status) || !strings.Contains(status.Status().Message, want) {
		t.Errorf("%s: %v; want a denial containing %q", what, err, want)
	}
}

// testPod is a Pod of UDS Core's tests: one container "test" of image
// 127.0.0.1/fake in policy-tests, edited by with.
func testPod(name string, with func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: PolicyTests},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "test", Image: "127.0.0.1/fake"}}},
	}
	if with != nil {
		with(p)
	}
	return p
}

// UDS Core's deadlock — its module down, its Fail webhook refusing the
// ClusterConfig the module needs to start — cannot form here: plan shows
// the ClusterConfig the gate waits for left out of every webhook, the
// istio-system webhook failing open, and no startup deadlock.
func TestPlanLeavesTheClusterConfigOutOfThePolicies(t *testing.T) {
	m := env.InstallModule(t, vigiltest.ModuleOptions{Dir: "."})
	out, err := exec.Command(m.Binary, "plan").CombinedOutput()
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, out)
	}
	plan := string(out)
	for _, want := range []string{
		"uds-core-policies (cluster-wide): registered when ready",
		"failurePolicy Ignore in namespaces istio-system (FailurePolicyIn",
		"ClusterConfig uds-cluster-config (cluster-scoped; the admission role refuses to register if ClusterConfig is a namespaced kind its webhooks or checks govern): gate uds-cluster-config (config.go:65) waits for it, so exactly this one object",
		"deadlocks: none found",
	} {
		if !strings.Contains(plan, want) {
			t.Errorf("plan lacks %q:\n%s", want, plan)
		}
	}
}
