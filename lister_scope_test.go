package vigil_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/admission"
)

// A lister scoped with InNamespace gets a Role in each of its namespaces to
// read its kind, and no ClusterRole rule for it: its informer cannot list
// or watch anything else. plan says what its informer selects.
func TestScopedListerRBACIsARoleInItsNamespaces(t *testing.T) {
	m := vigil.NewModule("scoped", vigil.Options{Namespace: "scoped-system"})
	vigil.NewLister(m, vigil.Kind("uds.dev", "v1alpha1", "Exemption")).InNamespace("uds-policy-exemptions", "more-exemptions")
	vigil.NewLister(m, vigil.Kind("uds.dev", "v1alpha1", "ClusterConfig"))
	vigil.When(m.Capability("policies"), &corev1.Pod{}).IsCreated().
		Validate(func(context.Context, *vigil.Request[*corev1.Pod]) vigil.Verdict { return admission.Allow() })
	roles := map[string][]rbacv1.PolicyRule{} // "Kind namespace" → rules
	for _, o := range renderManifests(t, m) {
		if o.GetKind() != "Role" && o.GetKind() != "ClusterRole" {
			continue
		}
		var r rbacv1.Role
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &r); err != nil {
			t.Fatal(err)
		}
		k := o.GetKind() + " " + o.GetNamespace()
		roles[k] = append(roles[k], r.Rules...)
	}
	reads := func(k, resource string) bool {
		for _, r := range roles[k] {
			if slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, "watch") && slices.Contains(r.Verbs, "list") {
				return true
			}
		}
		return false
	}
	for _, ns := range []string{"uds-policy-exemptions", "more-exemptions"} {
		if !reads("Role "+ns, "exemptions") {
			t.Errorf("no Role in %s to list and watch exemptions: %v", ns, roles)
		}
	}
	if reads("ClusterRole ", "exemptions") {
		t.Errorf("a ClusterRole lists and watches exemptions: the scoped lister's informer could cache every namespace's: %v", roles["ClusterRole "])
	}
	if !reads("ClusterRole ", "clusterconfigs") {
		t.Errorf("the cluster-wide lister of ClusterConfigs has no ClusterRole rule: %v", roles["ClusterRole "])
	}
	code, out := runCapture(t, m, "plan")
	if code != 0 || !strings.Contains(out, "Exemption: namespaces more-exemptions,uds-policy-exemptions") {
		t.Errorf("plan (exit %d) does not say the Exemption informer selects its two namespaces:\n%s", code, out)
	}
}

// InNamespace with no namespace, or an empty one, is a definition mistake.
func TestScopedListerNeedsNamespaces(t *testing.T) {
	m := vigil.NewModule("scoped", vigil.Options{Namespace: "scoped-system"})
	vigil.NewLister(m, vigil.Kind("uds.dev", "v1alpha1", "Exemption")).InNamespace("")
	if err := m.Verify(); err == nil || !strings.Contains(err.Error(), "lister_scope_test.go:") || !strings.Contains(err.Error(), "expected one or more namespace names, none empty") {
		t.Errorf("Verify() = %v, want the mistake at its call site", err)
	}
}
