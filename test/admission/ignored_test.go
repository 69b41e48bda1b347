package admission

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/testsupport/testkit"
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
	code, plan := testkit.RunCapture(t, m, "plan")
	if code != 0 || !strings.Contains(plan, ignored) {
		t.Errorf("plan (exit %d) does not name the ignored namespace %s:\n%s", code, ignored, plan)
	}

	testkit.RunWatcher(t, m, kubeconfig(t), "--leader-elect=false")
	c := newClient(t)
	for _, in := range []string{ignored, other} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: in, Name: "x", Labels: map[string]string{"seen": "yes"}}}
		if err := c.Create(t.Context(), cm); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Eventually(t, 10*time.Second, "the watch sees the ConfigMap of "+other, func() bool {
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

// The install adds ignored namespaces of its own: the roles take them as
// --ignore-namespace (the watcher's watches leave their objects alone),
// `manifests --ignore-namespace` hands them to the roles and puts them in
// the module's policies without changing the definition's fingerprint, and
// the chart's ignoredNamespaces value does the same. What is no namespace
// name, or the module's own namespace, is refused.
func TestIgnoredNamespacesGivenAtInstall(t *testing.T) {
	ns, ignored, other := env.Namespace(t), env.Namespace(t), env.Namespace(t)
	m := vigil.NewModule("ignoring-at-install", vigil.Options{Namespace: ns, IgnoredNamespaces: []string{"from-the-definition"}})
	policies := m.Capability("policies")
	vigil.When(policies, &corev1.ConfigMap{}).IsCreated().Named("need-team").
		Require(`has(object.metadata.labels) && 'team' in object.metadata.labels`, "add a team label")
	vigil.When(policies, &corev1.ConfigMap{}).IsCreated().Named("allow").
		Validate(func(context.Context, *vigil.Request[*corev1.ConfigMap]) vigil.Verdict { return admission.Allow() })
	var mu sync.Mutex
	seen := map[string]bool{}
	vigil.Watch(policies, &corev1.ConfigMap{}).WithLabel("seen").Named("seen").
		OnEvent(func(_ context.Context, cm *corev1.ConfigMap, _ vigil.WatchEvent) {
			mu.Lock()
			seen[cm.Namespace] = true
			mu.Unlock()
		}, vigil.EventAdded)
	vigil.Watch(policies, &corev1.Secret{}).Named("cleanup").Finalize(func(context.Context, *corev1.Secret) error { return nil })

	// The watcher, given the namespace at start.
	testkit.RunWatcher(t, m, kubeconfig(t), "--leader-elect=false", "--ignore-namespace", ignored)
	c := newClient(t)
	for _, in := range []string{ignored, other} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: in, Name: "x", Labels: map[string]string{"seen": "yes", "team": "a"}}}
		if err := c.Create(t.Context(), cm); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Eventually(t, 10*time.Second, "the watch sees the ConfigMap of "+other, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return seen[other]
	})
	time.Sleep(500 * time.Millisecond)
	mu.Lock()
	if seen[ignored] {
		t.Errorf("the watch acted on a ConfigMap of %s, which --ignore-namespace names", ignored)
	}
	mu.Unlock()

	// The manifests: the admission and the watcher Deployments.
	plain := testkit.RenderManifests(t, m)
	installed := testkit.RenderManifests(t, m, "--ignore-namespace", ignored)
	specHash := func(objs []*unstructured.Unstructured, withFlag bool) []string {
		t.Helper()
		var out []string
		roles := 0
		for _, o := range objs {
			if o.GetKind() != "Deployment" {
				continue
			}
			var d appsv1.Deployment
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d); err != nil {
				t.Fatal(err)
			}
			for _, ctr := range append(d.Spec.Template.Spec.InitContainers, d.Spec.Template.Spec.Containers...) {
				for _, e := range ctr.Env {
					if e.Name == "VIGIL_SPEC_HASH" {
						out = append(out, ctr.Name+"="+e.Value)
					}
				}
				if ctr.Name == "admission" || ctr.Name == "watcher" {
					roles++
					if has := strings.Contains(strings.Join(ctr.Args, " "), "--ignore-namespace "+ignored); has != withFlag {
						t.Errorf("container %s's args %v: --ignore-namespace %s there %v, want %v", ctr.Name, ctr.Args, ignored, has, withFlag)
					}
				}
			}
		}
		if roles != 2 {
			t.Errorf("found %d of the admission and watcher containers, want both", roles)
		}
		return out
	}
	if a, b := specHash(plain, false), specHash(installed, true); len(a) == 0 || !slices.Equal(a, b) {
		t.Errorf("the containers' definition fingerprints changed with --ignore-namespace: %v, then %v", a, b)
	}
	excludes := func(objs []*unstructured.Unstructured, what string) {
		t.Helper()
		for _, o := range objs {
			text, _ := json.Marshal(o.Object)
			if o.GetKind() == "ValidatingAdmissionPolicy" && o.GetName() == "ignoring-at-install-policies-need-team" && !strings.Contains(string(text), `"`+ignored+`"`) {
				t.Errorf("%s: the Require check's policy does not leave %s out:\n%s", what, ignored, text)
			}
			if o.GetKind() == "MutatingAdmissionPolicy" && !strings.Contains(string(text), `!(request.namespace in [\"`+ignored+`\"])`) {
				t.Errorf("%s: the Finalize binding's policy does not leave %s out:\n%s", what, ignored, text)
			}
		}
	}
	excludes(installed, "manifests --ignore-namespace")

	// The chart.
	chart, err := testkit.RenderChart(t, m, "v1.37.0", nil, map[string]any{"ignoredNamespaces": []any{ignored}})
	if err != nil {
		t.Fatal(err)
	}
	specHash(testkit.DecodeObjects(t, []byte(chart)), true)
	excludes(testkit.DecodeObjects(t, []byte(chart)), "the chart's ignoredNamespaces")
	if _, err := testkit.RenderChart(t, m, "v1.37.0", nil, map[string]any{"ignoredNamespaces": []any{"Not_A_Name"}}); err == nil || !strings.Contains(err.Error(), "ignoredNamespaces") {
		t.Errorf("the chart with ignoredNamespaces [Not_A_Name]: %v, want the schema to refuse it", err)
	}

	// Refused.
	for _, bad := range []string{"Not_A_Name", ns} {
		code, _ := testkit.RunCapture(t, m, "manifests", "--image", "example.com/m:1", "--ignore-namespace", bad)
		if code == 0 {
			t.Errorf("manifests --ignore-namespace %s: exit 0, want a refusal", bad)
		}
		if code := vigil.Execute(t.Context(), m, []string{"watcher", "--kubeconfig", kubeconfig(t), "--ignore-namespace", bad}); code == 0 {
			t.Errorf("watcher --ignore-namespace %s: exit 0, want a refusal", bad)
		}
	}
}
