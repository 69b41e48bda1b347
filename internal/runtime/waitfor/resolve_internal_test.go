package waitfor

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// A TYPE that discovery does not know is read as kubectl's ParseResourceArg
// reads it: NAME.VERSION.GROUP first when VERSION looks like one, NAME.GROUP
// too; the reading waited for is the one Group and Version name.
func TestParseTypeArg(t *testing.T) {
	for _, tc := range []struct {
		arg                  string
		name, group, version string
		readings             []typeQuery
	}{
		{"widgets.v1.example.com", "widgets", "example.com", "v1", []typeQuery{
			{name: "widgets", group: "example.com", version: "v1"},
			{name: "widgets", group: "v1.example.com"},
		}},
		{"Widget.v2beta1.example.com", "widget", "example.com", "v2beta1", []typeQuery{
			{name: "widget", group: "example.com", version: "v2beta1"},
			{name: "widget", group: "v2beta1.example.com"},
		}},
		{"whatsits.late.wait.vigil.dev", "whatsits", "late.wait.vigil.dev", "", []typeQuery{
			{name: "whatsits", group: "late.wait.vigil.dev"},
			{name: "whatsits", group: "wait.vigil.dev", version: "late"},
		}},
		{"clusterconfigs.uds.dev", "clusterconfigs", "uds.dev", "", []typeQuery{
			{name: "clusterconfigs", group: "uds.dev"},
		}},
		// The version reading's group, apps, has no dot: no CRD could serve it.
		{"things.v1.apps", "things", "v1.apps", "", []typeQuery{
			{name: "things", group: "v1.apps"},
		}},
	} {
		ns, err := parseTypeArg(tc.arg)
		if err != nil {
			t.Errorf("parseTypeArg(%q): %v", tc.arg, err)
			continue
		}
		if ns.Arg != tc.arg || ns.Name != tc.name || ns.Group != tc.group || ns.Version != tc.version || !reflect.DeepEqual(ns.readings, tc.readings) {
			t.Errorf("parseTypeArg(%q) = %+v, want name %q, group %q, version %q, readings %+v", tc.arg, *ns, tc.name, tc.group, tc.version, tc.readings)
		}
	}
	for arg, want := range map[string]string{
		"nosuchtype":       `the server doesn't have a resource type "nosuchtype"`,
		".example.com":     "expected a resource name before the group",
		"nosuchtypes.apps": `in group "apps", and no CustomResourceDefinition can add one`,
	} {
		if ns, err := parseTypeArg(arg); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseTypeArg(%q) = %+v, %v; want an error containing %q", arg, ns, err, want)
		}
	}
}

// crdServes finds the type of the reading a CRD serves, and says why a CRD
// that names the type does not serve it yet.
func TestCRDServes(t *testing.T) {
	crd := func(group string, established bool, versions ...string) *unstructured.Unstructured {
		var vs []any
		for _, v := range versions {
			vs = append(vs, map[string]any{"name": v, "served": true})
		}
		status := "False"
		if established {
			status = "True"
		}
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
			"metadata": map[string]any{"name": "widgets." + group, "generation": int64(1)},
			"spec": map[string]any{
				"group": group, "scope": "Namespaced", "versions": vs,
				"names": map[string]any{"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": []any{"wd"}},
			},
			"status": map[string]any{"conditions": []any{
				map[string]any{"type": "Established", "status": status, "reason": "Test", "message": "test"},
				map[string]any{"type": "NamesAccepted", "status": "True", "reason": "Test", "message": "test"},
			}},
		}}
		return u
	}
	ns, err := parseTypeArg("widgets.v1.example.com")
	if err != nil {
		t.Fatal(err)
	}
	got, ok, why := crdServes(crd("example.com", true, "v1", "v2"), ns.readings)
	want := Type{GVK: schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, Resource: "widgets", Namespaced: true}
	if !ok || got != want || why != "" {
		t.Fatalf("crdServes(example.com v1, v2) = %+v, %v, %q; want %+v", got, ok, why, want)
	}
	if _, ok, why := crdServes(crd("example.com", true, "v2"), ns.readings); ok || !strings.Contains(why, "does not serve version v1") {
		t.Fatalf("crdServes(example.com v2) = %v, %q; want not served in v1", ok, why)
	}
	if _, ok, why := crdServes(crd("example.com", false, "v1"), ns.readings); ok || !strings.Contains(why, "not established yet") {
		t.Fatalf("crdServes(not established) = %v, %q; want not established", ok, why)
	}
	if _, ok, why := crdServes(crd("other.com", true, "v1"), ns.readings); ok || why != "" {
		t.Fatalf("crdServes(other group) = %v, %q; want no match, nothing to say", ok, why)
	}
	// Without a version the highest served one is taken; a short name matches;
	// a kind query matches the kind exactly.
	ns, err = parseTypeArg("wd.example.com")
	if err != nil {
		t.Fatal(err)
	}
	if got, ok, _ := crdServes(crd("example.com", true, "v1", "v2beta1", "v2"), ns.readings); !ok || got.GVK.Version != "v2" {
		t.Fatalf("crdServes(wd.example.com) = %+v, %v; want version v2", got, ok)
	}
	kindQ := []typeQuery{{kind: "Widget", group: "example.com", version: "v1"}}
	if _, ok, _ := crdServes(crd("example.com", true, "v1"), kindQ); !ok {
		t.Fatal("crdServes(kind Widget v1): want served")
	}
	if _, ok, _ := crdServes(crd("example.com", true, "v1"), []typeQuery{{kind: "widget", group: "example.com", version: "v1"}}); ok {
		t.Fatal("crdServes(kind widget): a kind matches exactly")
	}
}
