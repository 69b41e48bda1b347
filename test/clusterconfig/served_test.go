package clusterconfig

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vigilkit/vigil/vigiltest"
)

// A cluster that serves no MutatingAdmissionPolicy cannot record who creates
// namespaces, which the module's Exemptions depend on: plan --cluster says so
// and exits 1, and the admission role exits 1 at start with the same words —
// the feature, the cluster's version and what to enable — before anything
// is registered.
func TestProvenanceIsRefusedWhereMutatingAdmissionPolicyIsNotServed(t *testing.T) {
	// The release's own control plane with the feature off: from 1.36,
	// where v1 is served by default, the gate and its resources turned off; before, the
	// gate off and no runtime-config turning a version on.
	flags := map[string]string{"feature-gates": "MutatingAdmissionPolicy=false", "runtime-config": ""}
	if minor, _ := strconv.Atoi(strings.TrimPrefix(env.KubernetesVersion, "1.")); minor >= 36 {
		flags = map[string]string{"feature-gates": "MutatingAdmissionPolicy=false", "runtime-config": "admissionregistration.k8s.io/v1/mutatingadmissionpolicies=false,admissionregistration.k8s.io/v1/mutatingadmissionpolicybindings=false"}
	}
	off, err := vigiltest.Start(vigiltest.Options{KubernetesVersion: env.KubernetesVersion, APIServerFlags: flags})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = off.Stop() })
	bin := vigiltest.BuildModule(t, moduleDir)
	kc := off.KubeConfigFile(t)
	want := "needs MutatingAdmissionPolicy, which this cluster (Kubernetes v1."

	plan := exec.CommandContext(t.Context(), bin, "plan", "--cluster", "--kubeconfig", kc)
	out, err := plan.CombinedOutput()
	if code := exitCode(err); code != 1 || !strings.Contains(string(out), want) || !strings.Contains(string(out), "vigil.NamespaceProvenance (declared at") {
		t.Fatalf("plan --cluster: exit %d, want 1 naming the feature (%q):\n%s", code, want, out)
	}

	ns := off.Namespace(t)
	admission := vigiltest.StartProcess(t, []string{"KUBECONFIG=" + kc, "VIGIL_NAMESPACE=" + ns}, bin, "admission", "--bootstrap")
	if code := admission.Wait(t, 30*time.Second); code != 1 {
		t.Fatalf("admission: exit %d, want 1:\n%s", code, admission.Output)
	}
	for _, w := range []string{want, "--feature-gates=MutatingAdmissionPolicy", "does not start"} {
		if !strings.Contains(admission.Output.String(), w) {
			t.Errorf("admission's output lacks %q:\n%s", w, admission.Output)
		}
	}
	hooks, err := off.Clientset.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(hooks.Items) != 0 {
		t.Errorf("a refused module registered %d webhook configurations", len(hooks.Items))
	}
}

// exitCode is the exit code err reports; 0 when nil.
func exitCode(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}
