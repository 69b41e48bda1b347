package main

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vigilkit/vigil/vigiltest"
)

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
}
