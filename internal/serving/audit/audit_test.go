package audit_test

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/vigilkit/vigil/internal/definition/spec"
)

func TestKindsListEachNamespaceOnce(t *testing.T) {
	cm := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	pod := schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	scale := schema.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}
	secret := schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	m := &spec.Module{Bindings: []spec.Binding{
		{Capability: "a", Action: spec.Validate, GVK: cm, Namespaces: []string{"apps"}},
		{Capability: "b", Action: spec.Validate, GVK: cm, Namespaces: []string{"apps", "web"}},
		{Capability: "a", Action: spec.Validate, GVK: pod, Namespaces: []string{"apps"}},
		{Capability: "c", Action: spec.Validate, GVK: pod}, // cluster-wide wins
		{Capability: "a", Action: spec.Mutate, GVK: secret},
		{Capability: "a", Action: spec.Validate, GVK: scale, Subresource: "scale"},
		{Capability: "s", Action: spec.Validate, GVK: secret, FailClosed: true},
	}}
	want := map[schema.GroupVersionKind][]string{cm: {"apps", "web"}, pod: nil}
	if got := m.AuditedKinds(); !reflect.DeepEqual(got, want) {
		t.Errorf("Kinds = %v, want %v", got, want)
	}
}
