package gate

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	_ Cond      = established{}
	_ Validator = established{}
)

// Established is satisfied when a CustomResourceDefinition has both
// Established=True and NamesAccepted=True. Established alone is not enough:
// a CRD whose names conflict with another can be Established while its kind
// is still not served under the names the module uses.
//
// Validate rejects any kind other than CustomResourceDefinition, because other
// kinds never report these conditions and the gate would wait forever.
func Established() Cond { return established{} }

type established struct{}

var establishedConds = [...]condition{
	{typ: "Established", want: metav1.ConditionTrue},
	{typ: "NamesAccepted", want: metav1.ConditionTrue},
}

func (established) Check(obj *unstructured.Unstructured) (bool, string) {
	for _, c := range establishedConds {
		if ok, why := c.Check(obj); !ok {
			return false, why
		}
	}
	return true, ""
}

func (established) String() string { return "established" }

func (established) Validate(gvk schema.GroupVersionKind) error {
	if gvk.Group == "apiextensions.k8s.io" && gvk.Kind == "CustomResourceDefinition" {
		return nil
	}
	return fmt.Errorf("gate.Established: expected a CustomResourceDefinition, got %s: Established applies only to CRDs; use gate.Ready() or gate.Condition(\"Available\", \"True\")", kindString(gvk))
}

// kindString prints a kind the way manifests spell it, "apps/v1 Deployment",
// which reads better in an error than schema's "apps/v1, Kind=Deployment".
func kindString(gvk schema.GroupVersionKind) string {
	if gvk.Empty() {
		return "no kind"
	}
	if gv := gvk.GroupVersion().String(); gv != "" {
		return gv + " " + gvk.Kind
	}
	return gvk.Kind
}
