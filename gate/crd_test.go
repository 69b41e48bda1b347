package gate

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestEstablished(t *testing.T) {
	crd := func(c ...string) map[string]any {
		return map[string]any{"status": map[string]any{"conditions": conds(c...)}}
	}
	const v1 = "apiextensions.k8s.io/v1"
	const kind = "CustomResourceDefinition"
	runChecks(t, []checkCase{
		{"nil", Established(), nil, false, "not found"},
		{"no status yet", Established(), u(v1, kind, "a.b.c", nil), false, "condition Established not set: no status.conditions"},
		{"installing", Established(), u(v1, kind, "a.b.c", crd("NamesAccepted", "True", "NoConflicts", "Established", "False", "Installing")), false, "condition Established=False (reason: Installing), want True"},
		{"established without names accepted", Established(), u(v1, kind, "a.b.c", crd("Established", "True", "InitialNamesAccepted")), false, "condition NamesAccepted not set"},
		{"name conflict", Established(), u(v1, kind, "a.b.c", crd("Established", "True", "", "NamesAccepted", "False", "NameConflict")), false, "condition NamesAccepted=False (reason: NameConflict), want True"},
		{"established", Established(), u(v1, kind, "a.b.c", crd("NamesAccepted", "True", "NoConflicts", "Established", "True", "InitialNamesAccepted")), true, ""},
	})
	if got := Established().String(); got != "established" {
		t.Errorf("String() = %q, want established", got)
	}
}

func TestEstablishedValidate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		gvk     schema.GroupVersionKind
		wantErr string
	}{
		{"crd v1", crdGVK, ""},
		{"crd v1beta1", schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1beta1", Kind: "CustomResourceDefinition"}, ""},
		{"configmap", configMapGVK, `gate.Established: expected a CustomResourceDefinition, got v1 ConfigMap: Established applies only to CRDs; use gate.Ready() or gate.Condition("Available", "True")`},
		{"deployment", schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, `gate.Established: expected a CustomResourceDefinition, got apps/v1 Deployment: Established applies only to CRDs; use gate.Ready() or gate.Condition("Available", "True")`},
		{"same kind in another group", schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "CustomResourceDefinition"}, "got example.com/v1 CustomResourceDefinition"},
		{"no kind", schema.GroupVersionKind{}, "got no kind"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Established().(Validator).Validate(tc.gvk)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("Validate(%v) = %v, want nil", tc.gvk, err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("Validate(%v) = %v, want an error containing %q", tc.gvk, err, tc.wantErr)
			}
		})
	}
}
