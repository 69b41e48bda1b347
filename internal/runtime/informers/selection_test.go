package informers

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/internal/definition/spec"
)

var cmGVK = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}

func TestByObjectTurnsAgreementIntoCacheOptions(t *testing.T) {
	by, err := ByObject([]spec.Agreed{{GVK: cmGVK, New: func() client.Object { return &corev1.ConfigMap{} }, Namespaces: []string{"a"}, Labels: "app=web,tier", Name: "x"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range by {
		if _, ok := o.Namespaces["a"]; !ok || len(o.Namespaces) != 1 {
			t.Errorf("namespaces: %v", o.Namespaces)
		}
		if o.Label.String() != "app=web,tier" || o.Field.String() != "metadata.name=x" {
			t.Errorf("selectors: label %q field %q", o.Label, o.Field)
		}
	}
	if _, err := ByObject([]spec.Agreed{{GVK: cmGVK, New: func() client.Object { return &corev1.ConfigMap{} }, Labels: "a==b==c"}}); err == nil {
		t.Error("a bad label selector was accepted")
	}
}
