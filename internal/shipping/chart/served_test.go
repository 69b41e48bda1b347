package chart_test

import (
	"strings"
	"testing"
)

// The chart writes MutatingAdmissionPolicy in the version Helm finds the
// cluster serving, and refuses a cluster that serves none, naming the
// feature and what to enable; without a cluster (helm template), it writes
// the version of the release Helm is told.
func TestChartChoosesTheServedMutatingAdmissionPolicyVersion(t *testing.T) {
	_, ch := writeChartOf(t, example(t, "clusterconfig"))
	for _, tc := range []struct {
		apis []string
		want string
	}{
		{[]string{"v1/Namespace", "admissionregistration.k8s.io/v1beta1/MutatingAdmissionPolicy"}, "apiVersion: admissionregistration.k8s.io/v1beta1\nkind: MutatingAdmissionPolicy\n"},
		{[]string{"v1/Namespace", "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy", "admissionregistration.k8s.io/v1beta1/MutatingAdmissionPolicy"}, "apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingAdmissionPolicy\n"},
		{nil, "apiVersion: admissionregistration.k8s.io/v1beta1\nkind: MutatingAdmissionPolicyBinding\n"}, // helm template for 1.34
	} {
		rel, err := renderWithAPIs(t, ch, nil, tc.apis...)
		if err != nil {
			t.Fatalf("APIs %v: %v", tc.apis, err)
		}
		if !strings.Contains(rel.Manifest, tc.want) {
			t.Errorf("APIs %v: the manifest lacks %q", tc.apis, tc.want)
		}
	}
	_, err := renderWithAPIs(t, ch, nil, "v1/Namespace")
	for _, w := range []string{"vigil.NamespaceProvenance (declared at", "needs MutatingAdmissionPolicy, which this cluster (Kubernetes v1.34.0) does not serve", "--runtime-config=admissionregistration.k8s.io/v1beta1=true"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("a cluster without MutatingAdmissionPolicy: %v, want %q", err, w)
		}
	}
}
