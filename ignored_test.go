package vigil_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/admission"
)

// A module's ignored namespaces are kept away from it: its webhooks select
// them out by their name label, which the API server sets, plan says so, and
// its watches never act on their objects while they act on everyone
// else's.
func TestIgnoredNamespacesAreKeptAwayFromTheModule(t *testing.T) {
	ns, ignored, other := env.Namespace(t), env.Namespace(t), env.Namespace(t)
	m := vigil.NewModule("ignoring", vigil.Options{Namespace: ns, IgnoredNamespaces: []string{ignored}})
	policies := m.Capability("policies")
	vigil.When(policies, &corev1.ConfigMap{}).IsCreated().Named("need-team").
		Validate(func(context.Context, *vigil.Request[*corev1.ConfigMap]) vigil.Verdict { return admission.Deny("no") })
	var mu sync.Mutex
	seen, seenNamespaces := map[string]bool{}, map[string]bool{}
	vigil.Watch(policies, &corev1.Namespace{}).Named("namespaces").
		OnEvent(func(_ context.Context, n *corev1.Namespace, _ vigil.WatchEvent) {
			mu.Lock()
			seenNamespaces[n.Name] = true
			mu.Unlock()
		}, vigil.EventAdded)
	vigil.Watch(policies, &corev1.ConfigMap{}).WithLabel("seen").Named("seen").
		OnEvent(func(_ context.Context, cm *corev1.ConfigMap, _ vigil.WatchEvent) {
			mu.Lock()
			seen[cm.Namespace] = true
			mu.Unlock()
		}, vigil.EventAdded)

	validating := enforcedValidating(t, m)
	for _, w := range validating.Webhooks {
		out := false
		for _, r := range w.NamespaceSelector.MatchExpressions {
			out = out || (r.Key == corev1.LabelMetadataName && r.Operator == metav1.LabelSelectorOpNotIn && slices.Contains(r.Values, ignored))
		}
		if !out {
			t.Errorf("webhook %s: namespaceSelector %v does not select %s out by its name", w.Name, w.NamespaceSelector, ignored)
		}
	}
	code, plan := runCapture(t, m, "plan")
	if code != 0 || !strings.Contains(plan, ignored) {
		t.Errorf("plan (exit %d) does not name the ignored namespace %s:\n%s", code, ignored, plan)
	}

	runWatcher(t, m, kubeconfig(t), "--leader-elect=false")
	c := newClient(t)
	for _, in := range []string{ignored, other} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: in, Name: "x", Labels: map[string]string{"seen": "yes"}}}
		if err := c.Create(t.Context(), cm); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, "the watch sees the ConfigMap of "+other, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return seen[other] && seenNamespaces[other]
	})
	time.Sleep(500 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if seen[ignored] {
		t.Errorf("the watch acted on a ConfigMap of the ignored namespace %s", ignored)
	}
	if seenNamespaces[ignored] {
		t.Errorf("the watch of Namespaces acted on the ignored Namespace %s itself", ignored)
	}
}

// An ignored namespace must be a namespace name.
func TestIgnoredNamespacesAreNames(t *testing.T) {
	m := vigil.NewModule("ignoring", vigil.Options{IgnoredNamespaces: []string{"Not_A_Name"}})
	if err := m.Verify(); err == nil || !strings.Contains(err.Error(), "ignored_test.go:") || !strings.Contains(err.Error(), `Options.IgnoredNamespaces: "Not_A_Name": expected a namespace name`) {
		t.Fatalf("Verify() = %v, want the name refused at its call site", err)
	}
}
