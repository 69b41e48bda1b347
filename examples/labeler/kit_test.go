package main

import (
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/vigiltest"
)

var env *vigiltest.Env

func TestMain(m *testing.M) { os.Exit(vigiltest.Run(m, vigiltest.Options{}, &env)) }

// The labeler as it ships: installed from its own manifests, its admission
// role run from their pod spec as its ServiceAccount, registered through
// the same steps as in a cluster; a ConfigMap without an app label is
// denied, one with it is labelled.
func TestLabelerAsShipped(t *testing.T) {
	m := env.InstallModule(t, vigiltest.ModuleOptions{})
	m.StartAdmission(60 * time.Second)
	ns := env.Namespace(t)

	msg := vigiltest.Denied(t, env.Client, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "no-app"}}, "has no app label")
	t.Logf("denied: %s", msg)

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "with-app", Labels: map[string]string{"app": "shop"}}}
	patch := vigiltest.Mutated(t, env.Client, cm)
	if !patch.HasLabel("vigil.dev/labeled", "true") {
		t.Fatalf("the labeler's patch: %s; want the label vigil.dev/labeled=true added", patch)
	}

	// Its ServiceAccount may renew its version's admission Lease, which
	// tells an older version (a rollback) whether this one still runs.
	lease := m.Name + "-admission-v0.0.0" // <module>-admission-v<version>
	vigiltest.Eventually(t, 10*time.Second, func() error {
		l, err := env.Clientset.CoordinationV1().Leases(m.Namespace).Get(t.Context(), lease, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if l.Spec.RenewTime == nil || time.Since(l.Spec.RenewTime.Time) > 10*time.Second {
			return fmt.Errorf("Lease %s renewed at %v: want within the last 10s", lease, l.Spec.RenewTime)
		}
		return nil
	})
}

// The labeler's policy cases (testdata/policies) pass in process, without
// the control plane, and again through the API server with the labeler
// installed and registered: what `labeler test` answers is what the
// cluster answers.
func TestPolicyCases(t *testing.T) {
	vigiltest.Cases(t, newModule(), "testdata/policies")

	m := env.InstallModule(t, vigiltest.ModuleOptions{})
	m.StartAdmission(60 * time.Second)
	kubeconfig := env.KubeConfigFile(t)
	// The checks' policies reach the API server's policy cache a moment
	// after they are created: retried until then.
	vigiltest.Eventually(t, 30*time.Second, func() error {
		if code := vigil.Execute(t.Context(), newModule(), []string{"test", "testdata/policies", "--kubeconfig", kubeconfig}); code != 0 {
			return fmt.Errorf("labeler test --kubeconfig exited %d: its report is above", code)
		}
		return nil
	})
}

// Installed in another namespace than its definition's default, rendered
// with VIGIL_NAMESPACE: the kit reports that namespace, the roles resolve
// the same definition there (their fingerprint agrees), and it serves.
func TestLabelerInAnotherNamespace(t *testing.T) {
	ns := env.Namespace(t)
	m := env.InstallModule(t, vigiltest.ModuleOptions{Env: []string{"VIGIL_NAMESPACE=" + ns}})
	if m.Namespace != ns {
		t.Fatalf("Module.Namespace = %s, want %s, where its manifests installed it", m.Namespace, ns)
	}
	m.StartAdmission(60 * time.Second)
	vigiltest.Denied(t, env.Client, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "no-app-" + ns}}, "has no app label")
}
