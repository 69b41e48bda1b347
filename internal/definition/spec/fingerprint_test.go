package spec

import (
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestFingerprintIsTheDefinitionsAndNamesWhatDiffers(t *testing.T) {
	def := func() *Module {
		return &Module{Name: "m", Namespace: "m-system", Bindings: []Binding{{
			Capability: "c", Name: "check", Action: Validate, GVK: schema.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Operations: []admissionv1.Operation{admissionv1.Create},
		}}}
	}
	a, err := def().Fingerprint()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := def().Fingerprint()
	if a.Sum != b.Sum || a.PartsString() != b.PartsString() || !strings.HasPrefix(a.Sum, "sha256:") {
		t.Fatalf("the same definition: %s and %s", a.Sum, b.Sum)
	}
	if d := a.Differing(b.PartsString()); len(d) != 0 {
		t.Errorf("the same definition differs in %v", d)
	}
	other := def()
	other.Namespace = "apps"
	other.Bindings[0].Operations = append(other.Bindings[0].Operations, admissionv1.Update)
	c, _ := other.Fingerprint()
	if c.Sum == a.Sum {
		t.Fatal("a changed definition has the same fingerprint")
	}
	if d := c.Differing(a.PartsString()); !slices.Equal(d, []string{"bindings", "namespace"}) {
		t.Errorf("differing parts %v, want [bindings namespace]", d)
	}
	if d := c.Differing("bindings=0,extra=1"); !slices.Contains(d, "extra") || !slices.Contains(d, "namespace") {
		t.Errorf("against parts another binary wrote: %v, want extra and namespace among them", d)
	}
}
