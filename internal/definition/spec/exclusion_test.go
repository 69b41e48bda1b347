package spec_test

import (
	"fmt"
	"testing"

	"github.com/google/cel-go/cel"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/vigilkit/vigil/internal/definition/spec"
)

// rendered decides r as the API server decides it from what the policy
// renders: the namespaceSelector on the namespace's labels (a Namespace's
// own; none for other cluster-scoped objects), the objectSelector on the
// object's, and each match condition, evaluated by CEL.
func rendered(t *testing.T, p spec.ExclusionPolicy, r spec.AdmissionRequest) bool {
	t.Helper()
	matches := func(s *metav1.LabelSelector, set map[string]string) bool {
		if s == nil {
			return true
		}
		sel, err := metav1.LabelSelectorAsSelector(s)
		if err != nil {
			t.Fatalf("selector %v: %v", s, err)
		}
		return sel.Matches(labels.Set(set))
	}
	if r.Namespace != "" {
		ns := map[string]string{"kubernetes.io/metadata.name": r.Namespace}
		for k, v := range r.NamespaceLabels {
			ns[k] = v
		}
		if !matches(p.NamespaceSelector(), ns) {
			return false
		}
	}
	if !matches(p.ObjectSelector(), r.Labels) {
		return false
	}
	env, err := cel.NewEnv(cel.Variable("request", cel.MapType(cel.StringType, cel.DynType)))
	if err != nil {
		t.Fatal(err)
	}
	request := map[string]any{
		"kind":      map[string]any{"group": r.Group, "version": "v1", "kind": r.Kind},
		"name":      r.Name,
		"namespace": r.Namespace,
	}
	for _, c := range p.MatchConditions() {
		ast, iss := env.Compile(c.Expression)
		if iss.Err() != nil {
			t.Fatalf("match condition %s: %v", c.Name, iss.Err())
		}
		prg, err := env.Program(ast)
		if err != nil {
			t.Fatal(err)
		}
		out, _, err := prg.Eval(map[string]any{"request": request})
		if err != nil {
			t.Fatalf("match condition %s on %v: %v", c.Name, r, err)
		}
		if out.Value() != true {
			return false
		}
	}
	return true
}

// TestExclusionPolicyAdmitsAsItRenders: for a table of requests, the Go
// evaluator the deadlock analysis uses and the selectors and match
// conditions the webhooks and checks carry agree, and both give the
// expected answer.
func TestExclusionPolicyAdmitsAsItRenders(t *testing.T) {
	const optOut = "opt.example.com/out"
	objects := []spec.Exclusion{
		{Version: "v1", Kind: "ConfigMap", Namespace: "apps", Name: "settings", Scope: spec.Namespaced},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole", Name: "initial", Scope: spec.ClusterScoped},
		{Group: "example.com", Version: "v1", Kind: "ClusterConfig", Name: "initial", Scope: spec.ScopeUnknown},
		{Version: "v1", Kind: "Namespace", Name: "tenant", Scope: spec.ClusterScoped},
	}
	all := spec.NewExclusionPolicy("m-system", nil, objects)
	limited := all.For([]string{"apps", "web"}, optOut)
	out := map[string]string{optOut: spec.OptOutValue}
	const optIn = "opt.example.com/in"
	optedIn := all.For(nil, "").WithOptIn(optIn)
	in := map[string]string{optIn: spec.OptOutValue}
	cm := func(ns, name string) spec.AdmissionRequest {
		return spec.AdmissionRequest{Version: "v1", Kind: "ConfigMap", Namespace: ns, Name: name}
	}
	withLabels := func(r spec.AdmissionRequest, obj, ns map[string]string) spec.AdmissionRequest {
		r.Labels, r.NamespaceLabels = obj, ns
		return r
	}
	cases := []struct {
		name   string
		policy spec.ExclusionPolicy
		req    spec.AdmissionRequest
		want   bool
	}{
		{"a tenant's ConfigMap", all, cm("apps", "other"), true},
		{"the gated ConfigMap", all, cm("apps", "settings"), false},
		{"the gated ConfigMap's name elsewhere", all, cm("web", "settings"), true},
		{"in the module's namespace", all, cm("m-system", "x"), false},
		{"in kube-system", all, cm("kube-system", "x"), false},
		{"in kube-node-lease", all, cm("kube-node-lease", "x"), false},
		{"the module's Namespace itself", all, spec.AdmissionRequest{Version: "v1", Kind: "Namespace", Namespace: "m-system", Name: "m-system"}, false},
		{"a Namespace", all, spec.AdmissionRequest{Version: "v1", Kind: "Namespace", Namespace: "web", Name: "web"}, true},
		{"the gated Namespace", all, spec.AdmissionRequest{Version: "v1", Kind: "Namespace", Namespace: "tenant", Name: "tenant"}, false},
		{"a Node", all, spec.AdmissionRequest{Version: "v1", Kind: "Node", Name: "n1"}, false},
		{"a Lease in a tenant's namespace", all, spec.AdmissionRequest{Group: "coordination.k8s.io", Version: "v1", Kind: "Lease", Namespace: "apps", Name: "l"}, false},
		{"a CSR", all, spec.AdmissionRequest{Group: "certificates.k8s.io", Version: "v1", Kind: "CertificateSigningRequest", Name: "c"}, false},
		{"the gated ClusterRole", all, spec.AdmissionRequest{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole", Name: "initial"}, false},
		{"another ClusterRole", all, spec.AdmissionRequest{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole", Name: "other"}, true},
		{"the gated object of unknown scope", all, spec.AdmissionRequest{Group: "example.com", Version: "v1", Kind: "ClusterConfig", Name: "initial"}, false},
		{"its name in a namespace", all, spec.AdmissionRequest{Group: "example.com", Version: "v1", Kind: "ClusterConfig", Namespace: "apps", Name: "initial"}, true},
		{"an opt-out label without an opt-out", all, withLabels(cm("apps", "x"), out, out), true},
		{"in a namespace it is limited to", limited, cm("web", "x"), true},
		{"outside the namespaces it is limited to", limited, cm("db", "x"), false},
		{"a cluster-scoped object, limited", limited, spec.AdmissionRequest{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole", Name: "other"}, true},
		{"an object opted out", limited, withLabels(cm("web", "x"), out, nil), false},
		{"an object in a namespace opted out", limited, withLabels(cm("web", "x"), nil, out), false},
		{"an opt-out label set to another value", limited, withLabels(cm("web", "x"), map[string]string{optOut: "false"}, map[string]string{optOut: "no"}), true},
		{"a Namespace opted out", limited, withLabels(spec.AdmissionRequest{Version: "v1", Kind: "Namespace", Namespace: "web", Name: "web"}, out, out), false},
		{"the gated ConfigMap, limited", limited, cm("apps", "settings"), false},
		{"in a namespace opted in", optedIn, withLabels(cm("web", "x"), nil, in), true},
		{"in a namespace not opted in", optedIn, cm("web", "x"), false},
		{"an object labelled, its namespace not", optedIn, withLabels(cm("web", "x"), in, nil), false},
		{"in a namespace opted in with another value", optedIn, withLabels(cm("web", "x"), nil, map[string]string{optIn: "yes"}), false},
		{"a Namespace opted in", optedIn, withLabels(spec.AdmissionRequest{Version: "v1", Kind: "Namespace", Namespace: "web", Name: "web"}, nil, in), true},
		{"a cluster-scoped object, opt-in", optedIn, spec.AdmissionRequest{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole", Name: "other"}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, via := c.policy.Admits(c.req), rendered(t, c.policy, c.req)
			if got != via || got != c.want {
				t.Errorf("%s: Admits %v, rendered selectors and match conditions %v, want %v", fmt.Sprint(c.req), got, via, c.want)
			}
		})
	}
}
