package rolebind

import (
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The namespace of a request is found in its path only for namespaced
// resources: the Namespace object itself, and cluster-scoped kinds, have
// none.
func TestNamespaceOfAPath(t *testing.T) {
	for path, want := range map[string]string{
		"/api/v1/namespaces/apps/configmaps":                          "apps",
		"/api/v1/namespaces/apps/pods/web/status":                     "apps",
		"/apis/apps/v1/namespaces/team-b/deployments":                 "team-b",
		"/apis/wgpolicyk8s.io/v1alpha2/namespaces/x/policyreports/y":  "x",
		"/api/v1/namespaces/apps":                                     "",
		"/api/v1/namespaces":                                          "",
		"/apis/rbac.authorization.k8s.io/v1/clusterroles/namespaces":  "",
		"/apis/example.dev/v1/tenants":                                "",
		"/apis/example.dev/v1/namespaces/namespaces/tenants/children": "namespaces",
	} {
		if got := namespaceOf(path); got != want {
			t.Errorf("namespaceOf(%q) = %q, want %q", path, got, want)
		}
	}
}

// The namespace of a refusal is read from the API server's message, as
// kube-apiserver's RBAC authorizer words it.
func TestForbiddenNamesItsNamespace(t *testing.T) {
	err := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "",
		fmt.Errorf(`User "system:serviceaccount:kit-system:kit-watcher" cannot list resource "configmaps" in API group "" in the namespace "kit-apps"`))
	m := forbiddenIn.FindStringSubmatch(err.Error())
	if m == nil || m[1] != "kit-apps" {
		t.Fatalf("forbiddenIn in %q: %v, want kit-apps", err, m)
	}
	cluster := apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "", fmt.Errorf(`User "u" cannot list resource "nodes" in API group "" at the cluster scope`))
	if m := forbiddenIn.FindStringSubmatch(cluster.Error()); m != nil {
		t.Fatalf("forbiddenIn in %q: %v, want none", cluster, m)
	}
}
