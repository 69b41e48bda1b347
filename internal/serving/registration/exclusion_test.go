package registration_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"

	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/serving/registration"
)

// spec.ScopeOf's fixed list agrees with a real API server: every kind it
// places is served with that scope, and of the groups it knows every kind
// the server serves is placed.
func TestScopeOfAgreesWithDiscovery(t *testing.T) {
	d, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	_, lists, err := d.ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, k := range []string{"", "apps", "batch", "rbac.authorization.k8s.io", "storage.k8s.io", "admissionregistration.k8s.io"} {
		known[k] = true
	}
	checked := 0
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") {
				continue // a subresource
			}
			want := spec.ClusterScoped
			if r.Namespaced {
				want = spec.Namespaced
			}
			got := spec.ScopeOf(gv.Group, r.Kind)
			switch {
			case got == spec.ScopeUnknown && (known[gv.Group] || strings.HasSuffix(gv.Group, ".k8s.io") && !strings.Contains(gv.Group, "vigil")):
				t.Errorf("ScopeOf(%q, %q) unknown, served as %s", gv.Group, r.Kind, want)
			case got != spec.ScopeUnknown && got != want:
				t.Errorf("ScopeOf(%q, %q) = %s, served as %s", gv.Group, r.Kind, got, want)
			}
			if got != spec.ScopeUnknown {
				checked++
			}
		}
	}
	if checked < 50 {
		t.Errorf("checked %d kinds against discovery, want the built-in ones (50 or more)", checked)
	}
}

// One exclusion value, rendered alike: each object a gate waits for is
// excluded from the webhooks and the checks by kind, namespace and name, or
// as cluster-scoped; a gate by name in every namespace of a namespaced kind
// excludes nothing.
func TestExclusionsRenderExactlyTheGatedObjects(t *testing.T) {
	obj := func(gvk schema.GroupVersionKind, ns, name string) *spec.Object {
		o := spec.ObjectOf(gvk, ns, name)
		return &o
	}
	gates := []spec.Gate{
		{Name: "seed", Site: "m.go:1", Waits: obj(schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, "infra", "seed")},
		{Name: "team", Site: "m.go:2", Waits: obj(schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, "", "team")},
		{Name: "initial", Site: "m.go:3", Waits: obj(schema.GroupVersionKind{Group: "uds.dev", Version: "v1alpha1", Kind: "ClusterConfig"}, "", "initial")},
		{Name: "anywhere", Site: "m.go:4", Waits: obj(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, "", "settings")},
		{Name: "again", Site: "m.go:5", Waits: obj(schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, "infra", "seed")},
	}
	m := &spec.Module{Name: "m", Namespace: "m-system", Phases: spec.GroupPhases(gates),
		Checks: []spec.Check{{Capability: "c", Name: "x", GVK: schema.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Operations: []admissionv1.Operation{admissionv1.Create}, Expression: "true", Message: "no"}},
	}
	want := []spec.Exclusion{
		{Version: "v1", Kind: "Namespace", Name: "team", Scope: spec.ClusterScoped, Gate: "team", Site: "m.go:2"},
		{Version: "v1", Kind: "Pod", Namespace: "infra", Name: "seed", Scope: spec.Namespaced, Gate: "seed", Site: "m.go:1"},
		{Group: "uds.dev", Version: "v1alpha1", Kind: "ClusterConfig", Name: "initial", Scope: spec.ScopeUnknown, Gate: "initial", Site: "m.go:3"},
	}
	if got := m.Exclusions(); !reflect.DeepEqual(got, want) {
		t.Errorf("Exclusions() =\n%+v\nwant\n%+v", got, want)
	}
	cond := `!((request.kind.group == "" && request.kind.kind == "Namespace" && request.name == "team") || ` +
		`(request.kind.group == "" && request.kind.kind == "Pod" && request.name == "seed" && request.namespace == "infra") || ` +
		`(request.kind.group == "uds.dev" && request.kind.kind == "ClusterConfig" && request.name == "initial" && request.namespace == ""))`
	policy := registration.Checks(m)[0].Policy
	var got string
	for _, c := range policy.Spec.MatchConditions {
		if c.Name == "not-gated-objects" {
			got = c.Expression
		}
	}
	if got != cond {
		t.Errorf("the check's not-gated-objects:\n%s\nwant\n%s", got, cond)
	}
	// The webhooks render the same value.
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, meta.RESTScopeNamespace)
	b := spec.Binding{Capability: "c", Name: "v", Action: spec.Validate, GVK: schema.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Operations: []admissionv1.Operation{admissionv1.Create}, FailClosed: true}
	r := registration.New(nil, registration.Options{Module: "m", Namespace: "m-system", Bindings: []spec.Binding{b}, Gated: registration.GatedObjects(m), Mapper: mapper,
		CABundle: func() []byte { return nil },
		ClientConfig: func(string) admissionregistrationv1.WebhookClientConfig {
			return admissionregistrationv1.WebhookClientConfig{}
		},
	})
	_, val, err := r.Static()
	if err != nil {
		t.Fatal(err)
	}
	if len(val.Webhooks) != 1 || !reflect.DeepEqual(val.Webhooks[0].MatchConditions, policy.Spec.MatchConditions) {
		t.Errorf("the webhooks' match conditions %+v, want the check's %+v", val.Webhooks, policy.Spec.MatchConditions)
	}
}

// A fail-closed capability's namespace policy: its static webhook leaves
// the namespaces out, and a webhook of their own answers them with their
// policy (Ignore), for namespaced objects and their Namespaces only; a
// binding IfServed whose kind is not served is left out, not an error.
func TestNamespacePoliciesAndIfServedRenderInTheStaticWebhooks(t *testing.T) {
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, meta.RESTScopeNamespace)
	pods := spec.Binding{Capability: "c", Name: "v", Action: spec.Validate, GVK: schema.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Operations: []admissionv1.Operation{admissionv1.Create}, FailClosed: true,
		NamespacePolicies: []spec.NamespacePolicy{{Policy: "Ignore", Namespaces: []string{"istio-system"}}}}
	probes := spec.Binding{Capability: "c", Name: "p", Action: spec.Validate, GVK: schema.GroupVersionKind{Group: "monitoring.coreos.com", Version: "v1", Kind: "Probe"},
		Operations: []admissionv1.Operation{admissionv1.Create}, FailClosed: true, IfServed: true}
	r := registration.New(nil, registration.Options{Module: "m", Namespace: "m-system", Bindings: []spec.Binding{pods, probes}, Mapper: mapper,
		CABundle: func() []byte { return nil },
		ClientConfig: func(string) admissionregistrationv1.WebhookClientConfig {
			return admissionregistrationv1.WebhookClientConfig{}
		},
	})
	_, val, err := r.Static()
	if err != nil {
		t.Fatalf("Static with an IfServed binding whose kind is not served: %v", err)
	}
	if len(val.Webhooks) != 2 {
		t.Fatalf("%d webhooks, want the capability's and its istio-system one: %+v", len(val.Webhooks), val.Webhooks)
	}
	for _, w := range val.Webhooks {
		sel := fmt.Sprint(w.NamespaceSelector.MatchExpressions)
		rules := fmt.Sprint(w.Rules)
		if strings.Contains(rules, "probes") {
			t.Errorf("webhook %s has a rule for probes, whose kind is not served", w.Name)
		}
		switch w.Name {
		case "c.validate.m.vigil.dev":
			if *w.FailurePolicy != admissionregistrationv1.Fail || !strings.Contains(sel, "NotIn [kube-node-lease kube-system m-system istio-system]") {
				t.Errorf("the capability's webhook: failurePolicy %s, namespaceSelector %s; want Fail, istio-system left out", *w.FailurePolicy, sel)
			}
		case "ignore.c.validate.m.vigil.dev":
			last := w.MatchConditions[len(w.MatchConditions)-1]
			if *w.FailurePolicy != admissionregistrationv1.Ignore || !strings.Contains(sel, "In [istio-system]") || last.Name != "in-namespaces" {
				t.Errorf("the istio-system webhook: failurePolicy %s, namespaceSelector %s, last condition %+v; want Ignore, istio-system only, namespaced objects", *w.FailurePolicy, sel, last)
			}
		default:
			t.Errorf("unexpected webhook %s", w.Name)
		}
	}
}
