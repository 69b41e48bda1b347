package dev

import (
	"context"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/vigilkit/vigil/internal/spec"
)

// vigil dev creates a module's trusted namespace and its provenance stamp, as
// the manifests would, the stamp marked as the session's: the session's end
// removes the stamp and leaves the namespace, with what it holds.
func TestDevCreatesTrustAndRemovesOnlyTheStamp(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset()
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
