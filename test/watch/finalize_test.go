package watch

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/internal/runtime/served"
	"github.com/vigilkit/vigil/internal/testsupport/testkit"
)

// A Finalize binding's finalizer goes on as its objects are created, by a
// MutatingAdmissionPolicy the manifests ship: an object deleted right after
// its create is still finalized, which the watcher alone, putting the
// finalizer on once it has seen the object, can miss. An object the binding
// does not select gets none, and one that leaves the binding (its label
// removed) is released without its handler. `unregister
// --remove-finalizers` takes the policy away first, so that nothing created
// after it is held.
func TestFinalizeSeesObjectsDeletedAsSoonAsCreated(t *testing.T) {
	ns := env.Namespace(t)
	c := newClient(t)
	const module = "earlyfin"
	m := vigil.NewModule(module, vigil.Options{Namespace: ns})
	var mu sync.Mutex
	var finalized []string
	vigil.Watch(m.Capability("cleanup"), &corev1.ConfigMap{}).InNamespace(ns).WithLabelValue("cleanup", "yes").Named("configmaps").
		Finalize(func(_ context.Context, cm *corev1.ConfigMap) error {
			mu.Lock()
			defer mu.Unlock()
			finalized = append(finalized, cm.Name)
			return nil
		})
	finalizer := module + ".vigil.dev/cleanup.configmaps"
	was := func(name string) bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(finalized, name)
	}
	labelled := func(name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"cleanup": "yes"}}}
	}
	gone := func(name string) bool {
		return apierrors.IsNotFound(c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &corev1.ConfigMap{}))
	}
	createThenDelete := func(name string) {
		t.Helper()
		cm := labelled(name)
		if err := c.Create(t.Context(), cm); err != nil {
			t.Fatal(err)
		}
		if err := c.Delete(t.Context(), cm); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	stop := testkit.RunWatcher(t, m, kubeconfig(t), "--leader-elect=false")
	const n = 20

	// The window, with the watcher alone: a figure, not a verdict.
	for i := range n {
		createThenDelete("window-" + string(rune('a'+i)))
	}
	time.Sleep(2 * time.Second)
	missed := 0
	for i := range n {
		if !was("window-" + string(rune('a'+i))) {
			missed++
		}
	}
	t.Logf("the watcher alone: %d of %d objects deleted right after their create were never finalized", missed, n)

	// The manifests' policy for the binding.
	var policies []*unstructured.Unstructured
	for _, o := range testkit.RenderManifests(t, m) {
		if strings.HasPrefix(o.GetKind(), "MutatingAdmissionPolicy") {
			policies = append(policies, o)
			t.Cleanup(func() { _ = c.Delete(context.Background(), o.DeepCopy()) })
		}
	}
	cluster, err := served.DiscoverConfig(t.Context(), env.Config)
	if err != nil {
		t.Fatal(err)
	}
	if !cluster.Default(served.MutatingAdmissionPolicy) {
		// Kubernetes 1.33 to 1.35: the manifests leave the policy out, and
		// the watcher alone puts the finalizer on.
		if len(policies) != 0 {
			t.Fatalf("the manifests for Kubernetes %s ship %d MutatingAdmissionPolicy objects, which it does not serve by default", cluster.GitVersion, len(policies))
		}
		t.Logf("Kubernetes %s does not serve MutatingAdmissionPolicy by default: the finalizer window stays", cluster.GitVersion)
		return
	}
	if len(policies) != 2 {
		t.Fatalf("the manifests ship %d MutatingAdmissionPolicy objects for one Finalize binding, want the policy and its binding", len(policies))
	}
	applyObjects(t, policies, false)
	probe := 0
	testkit.Eventually(t, 20*time.Second, "the finalizer put on at the create", func() bool {
		probe++
		cm := labelled("probe-" + string(rune('a'+probe%26)) + strings.Repeat("x", probe/26))
		if err := c.Create(t.Context(), cm); err != nil {
			t.Fatal(err)
		}
		return slices.Contains(cm.Finalizers, finalizer)
	})

	for i := range n {
		createThenDelete("early-" + string(rune('a'+i)))
	}
	testkit.Eventually(t, 20*time.Second, "every object deleted right after its create finalized, and gone", func() bool {
		for i := range n {
			if name := "early-" + string(rune('a'+i)); !was(name) || !gone(name) {
				return false
			}
		}
		return true
	})

	// Not selected: no finalizer. Leaving the binding: released, unhandled.
	plain := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plain", Labels: map[string]string{"cleanup": "no"}}}
	if err := c.Create(t.Context(), plain); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(plain.Finalizers, finalizer) {
		t.Errorf("an object the binding does not select got its finalizer at admission: %v", plain.Finalizers)
	}
	leaving := labelled("leaving")
	if err := c.Create(t.Context(), leaving); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(leaving.Finalizers, finalizer) {
		t.Fatalf("no finalizer at admission on %s: %v", leaving.Name, leaving.Finalizers)
	}
	leaving.Labels = nil
	if err := c.Update(t.Context(), leaving); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the finalizer released from an object that left the binding", func() bool {
		cm := &corev1.ConfigMap{}
		return c.Get(context.Background(), client.ObjectKeyFromObject(leaving), cm) == nil && !slices.Contains(cm.Finalizers, finalizer)
	})
	if err := c.Delete(t.Context(), leaving); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the released object gone", func() bool { return gone("leaving") })
	if was("leaving") {
		t.Error("the handler ran for an object that had left the binding")
	}

	// Uninstall: the policy goes before the finalizers are stripped.
	stop()
	if code := vigil.Execute(t.Context(), m, []string{"unregister", "--remove-finalizers", "--kubeconfig", kubeconfig(t)}); code != 0 {
		t.Fatalf("unregister --remove-finalizers exited %d", code)
	}
	testkit.Eventually(t, 20*time.Second, "no finalizer on objects created after unregister", func() bool {
		probe++
		cm := labelled("after-" + string(rune('a'+probe%26)) + strings.Repeat("x", probe/26))
		if err := c.Create(t.Context(), cm); err != nil {
			t.Fatal(err)
		}
		return !slices.Contains(cm.Finalizers, finalizer)
	})
	var binding unstructured.Unstructured
	for _, p := range policies {
		if strings.HasSuffix(p.GetKind(), "Binding") {
			binding.SetGroupVersionKind(p.GroupVersionKind())
			if err := c.Get(t.Context(), client.ObjectKey{Name: p.GetName()}, &binding); !apierrors.IsNotFound(err) {
				t.Errorf("the policy's binding after unregister: %v, want it gone", err)
			}
		}
	}
}

// The chart carries a Finalize binding's policy where the cluster serves
// MutatingAdmissionPolicy by default, and leaves it out elsewhere: it never
// fails an install on an older cluster for it.
func TestChartPutsTheFinalizerOnWhereServed(t *testing.T) {
	m := vigil.NewModule("chartfin", vigil.Options{Namespace: "chartfin-system"})
	vigil.Watch(m.Capability("cleanup"), &corev1.ConfigMap{}).WithLabel("cleanup").Named("configmaps").
		Finalize(func(context.Context, *corev1.ConfigMap) error { return nil })
	const policy = "chartfin-finalizer-cleanup.configmaps"
	for _, tc := range []struct {
		kube string
		apis []string
		want bool
	}{
		{"v1.37.0", []string{"admissionregistration.k8s.io/v1/MutatingAdmissionPolicy", "v1/Namespace"}, true},
		{"v1.37.0", nil, true}, // helm template: by the release
		{"v1.35.0", []string{"admissionregistration.k8s.io/v1beta1/MutatingAdmissionPolicy", "v1/Namespace"}, false},
		{"v1.34.0", nil, false},
	} {
		manifest, err := testkit.RenderChart(t, m, tc.kube, tc.apis, nil)
		if err != nil {
			t.Fatalf("render for %s %v: %v", tc.kube, tc.apis, err)
		}
		got := strings.Count(manifest, "name: "+policy+"\n")
		if tc.want && (got != 2 || !strings.Contains(manifest, "apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingAdmissionPolicy\n")) {
			t.Errorf("Kubernetes %s %v: the chart renders the policy %s and its binding %d times in v1, want once each:\n%s", tc.kube, tc.apis, policy, got, manifest)
		}
		if !tc.want && got != 0 {
			t.Errorf("Kubernetes %s %v: the chart renders the policy %s, which the cluster does not serve by default", tc.kube, tc.apis, policy)
		}
	}
}
