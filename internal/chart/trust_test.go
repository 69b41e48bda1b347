package chart_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The chart creates the module's trusted namespace whether or not it creates
// the module's own, keeps it at uninstall, and trusted.allowed adds the
// installer's identity — a username, or a group — to the users and groups
// its guard and the provenance guard allow, besides the module's own.
func TestChartTrustedNamespaceAndInstaller(t *testing.T) {
	_, ch := writeChartOf(t, example(t, "clusterconfig"))
	rel, err := render(t, ch, map[string]any{
		"namespace": map[string]any{"create": false},
		"trusted":   map[string]any{"allowed": []any{"system:serviceaccount:ci:deployer", "group:ci-admins"}},
	})
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	got := objects(t, rel.Manifest)
	ns, ok := got["Namespace /uds-policy-exemptions"]
	if !ok {
		t.Fatalf("the chart does not create the exemptions namespace with namespace.create=false")
	}
	if _, own := got["Namespace /uds-system"]; own {
		t.Errorf("namespace.create=false, yet the chart creates the module's namespace")
	}
	u := unstructured.Unstructured{Object: ns}
	if u.GetAnnotations()["helm.sh/resource-policy"] != "keep" || u.GetLabels()["app.kubernetes.io/name"] != "uds-core" {
		t.Errorf("the exemptions namespace: labels %v, annotations %v; want the module's label, and kept at uninstall", u.GetLabels(), u.GetAnnotations())
	}
	for _, policy := range []string{"uds-core-trusted-uds-policy-exemptions", "uds-core-namespace-created-by-guard"} {
		p, ok := got["ValidatingAdmissionPolicy /"+policy]
		if !ok {
			t.Errorf("ValidatingAdmissionPolicy %s not rendered", policy)
			continue
		}
		vars, _, _ := unstructured.NestedSlice(p, "spec", "variables")
		have := map[string]string{}
		for _, v := range vars {
			v := v.(map[string]any)
			have[v["name"].(string)] = v["expression"].(string)
		}
		if have["allowedUsers"] != `["system:serviceaccount:ci:deployer"]` || have["allowedGroups"] != `["system:masters","ci-admins"]` {
			t.Errorf("%s allows %v; want users [system:serviceaccount:ci:deployer], groups [system:masters ci-admins]", policy, have)
		}
	}
}
