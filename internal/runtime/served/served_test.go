package served

import (
	"strings"
	"testing"

	"github.com/vigilkit/vigil/internal/clusters/kubeversion"
)

// What each release serves once its gates are on, and what a cluster
// without the kind is told to enable.
func TestReleaseServesMutatingAdmissionPolicy(t *testing.T) {
	want := map[int]string{33: "v1alpha1", 34: "v1beta1", 35: "v1beta1", 36: "v1", 37: "v1"}
	for _, r := range kubeversion.Supported() {
		c := Release(r)
		if got := c.Version(MutatingAdmissionPolicy); got != want[r.Minor] {
			t.Errorf("%s: MutatingAdmissionPolicy %q, want %q", r, got, want[r.Minor])
		}
		if got := c.Default(MutatingAdmissionPolicy); got != (r.Minor >= 36) {
			t.Errorf("%s: served by default = %v", r, got)
		}
		if c.Version(ValidatingAdmissionPolicy) != "v1" || c.Missing("x", ValidatingAdmissionPolicy) != nil {
			t.Errorf("%s: ValidatingAdmissionPolicy v1 not served", r)
		}
	}
	none := Cluster{GitVersion: "v1.34.4", Minor: 34}
	err := none.Missing("vigil.NamespaceProvenance (declared at main.go:12)", MutatingAdmissionPolicy)
	for _, w := range []string{"vigil.NamespaceProvenance (declared at main.go:12) needs MutatingAdmissionPolicy", "Kubernetes v1.34.4",
		"--feature-gates=MutatingAdmissionPolicy=true --runtime-config=admissionregistration.k8s.io/v1beta1=true", "upgrade to 1.36"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("Missing = %v, want %q", err, w)
		}
	}
	off := Cluster{GitVersion: "v1.37.2", Minor: 37}
	if err := off.Missing("x", MutatingAdmissionPolicy); err == nil || !strings.Contains(err.Error(), "turned off here") {
		t.Errorf("Missing on 1.37 = %v, want it told it is turned off", err)
	}
}
