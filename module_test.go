package vigil_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vigilkit/vigil"
)

func TestNewModuleReportsBadDefinitionsWithCallSite(t *testing.T) {
	for _, tc := range []struct {
		name, module string
		opts         vigil.Options
		want         []string
	}{
		{"valid", "uds-core", vigil.Options{Namespace: "uds-system"}, nil},
		{"bad name", "UDS_Core", vigil.Options{}, []string{`module name "UDS_Core" is not a valid DNS-1123 label`, "module_test.go:"}},
		{"bad namespace", "uds-core", vigil.Options{Namespace: "Not OK"}, []string{`Options.Namespace "Not OK"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := vigil.NewModule(tc.module, tc.opts).Validate()
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate() = nil, want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestNewModuleDefaultsNamespace(t *testing.T) {
	if ns := vigil.NewModule("m", vigil.Options{}).Namespace(); ns != vigil.DefaultNamespace {
		t.Fatalf("Namespace() = %q, want %q", ns, vigil.DefaultNamespace)
	}
}

func ExampleNewModule() {
	m := vigil.NewModule("uds-core", vigil.Options{Namespace: "uds-system"})
	fmt.Println(m.Name(), m.Namespace(), m.Validate())
	// Output: uds-core uds-system <nil>
}
