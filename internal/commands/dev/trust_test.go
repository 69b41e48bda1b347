package dev

import (
	"context"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/testsupport/testenv"
	"github.com/vigilkit/vigil/vigiltest"
)

// vigil dev creates a module's trusted namespace and its provenance stamp, as
// the manifests would, the stamp marked as the session's and in the version
// of MutatingAdmissionPolicy the API server serves: the session's end
// removes the stamp and leaves the namespace, with what it holds.
func TestDevCreatesTrustAndRemovesOnlyTheStamp(t *testing.T) {
	testenv.ControlPlane(t)
	env, err := vigiltest.Start(vigiltest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx := context.Background()
	cs := env.Clientset
	m := &spec.Module{Name: "m", Namespace: "m-system", TrustedNamespaces: []spec.TrustedNamespace{{Name: "m-exemptions"}}, Provenance: &spec.Provenance{}}
	if err := createTrust(ctx, cs, m, func(string) {}); err != nil {
		t.Fatal(err)
	}
	if err := createTrust(ctx, cs, m, func(string) {}); err != nil { // the next session's
		t.Fatalf("again: %v", err)
	}
	if _, err := cs.CoreV1().Namespaces().Get(ctx, "m-exemptions", metav1.GetOptions{}); err != nil {
		t.Fatalf("the trusted namespace: %v", err)
	}
	removed, err := removeSessionObjects(ctx, cs, "m")
	if err != nil {
		t.Fatal(err)
	}
	want := []object{{"MutatingAdmissionPolicyBinding", "m-namespace-created-by"}, {"MutatingAdmissionPolicy", "m-namespace-created-by"}}
	if !slices.Equal(removed, want) {
		t.Errorf("removed %v, want %v", removed, want)
	}
	if _, err := cs.CoreV1().Namespaces().Get(ctx, "m-exemptions", metav1.GetOptions{}); err != nil {
		t.Errorf("the trusted namespace after the session: %v, want it left", err)
	}
}
