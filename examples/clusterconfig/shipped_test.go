package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vigilkit/vigil/vigiltest"
)

// The module as it ships, every role run from its manifests' pod specs as
// a kubelet would: its defaults Secret mounted where the module reads it,
// each role as its own ServiceAccount with the generated RBAC only. The
// three gate phases run as init containers, admission registers, and the
// watcher's Reconcile takes the ClusterConfig in. A wrong mount, env var,
// argument or RBAC rule in what ships fails here.
func TestClusterConfigAsShipped(t *testing.T) {
	ctx := t.Context()
	crds, err := os.ReadFile("crds.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := env.InstallCRDYAML(crds); err != nil {
		t.Fatal(err)
	}
	// The exemptions namespace, where the module's lister of Exemptions
	// has its Role.
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "uds-policy-exemptions"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	m := env.InstallModule(t, vigiltest.ModuleOptions{})
	if m.Phases() != 3 {
		t.Fatalf("%d gate phases in the manifests, want 3", m.Phases())
	}
	defaults := "attributes:\n  clusterName: from-the-secret\nexpose:\n  domain: secret.example\n  adminDomain: admin.secret.example\n"
	if err := env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: DefaultsSecret},
		Data: map[string][]byte{DefaultsKey: []byte(defaults)}}); err != nil {
		t.Fatal(err)
	}
	cc := readYAML(t, "clusterconfig.yaml")
	if err := env.Client.Create(ctx, cc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Client.Delete(context.Background(), cc); err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
		}
	})

	runs := m.RunGates(60 * time.Second)
	if len(runs) != 3 {
		t.Fatalf("%d phases ran, want 3", len(runs))
	}
	// Phase 1 merged the ClusterConfig over the mounted defaults.
	if out := runs[1].Output; strings.Contains(out, "gate fallback") {
		t.Errorf("phase 1 fell back though the ClusterConfig exists:\n%s", out)
	}

	m.StartAdmission(60 * time.Second)
	m.StartWatcher(60 * time.Second)
	vigiltest.Eventually(t, 30*time.Second, vigiltest.Get(env.Client, cc, func(cc *unstructured.Unstructured) error {
		phase, _, _ := unstructured.NestedString(cc.Object, "status", "phase")
		name, _, _ := unstructured.NestedString(cc.Object, "status", "clusterName")
		if phase != "Ready" || name != "demo-cluster" {
			return fmt.Errorf("status %v: want phase Ready for clusterName demo-cluster", cc.Object["status"])
		}
		return nil
	}))
}
