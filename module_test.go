package vigil_test

import (
	"fmt"
	"os/exec"
	"slices"
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
			err := vigil.NewModule(tc.module, tc.opts).Verify()
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Verify() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Verify() = nil, want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Verify() = %q, want it to contain %q", err, w)
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
	fmt.Println(m.Name(), m.Namespace(), m.Verify())
	// Output: uds-core uds-system <nil>
}

// A module binary links the module's command line and roles, never the vigil
// CLI's developer tools: the control-plane builder, vigil dev, the scaffold
// or golang.org/x/mod.
func TestModuleBinariesLinkNoDeveloperCLI(t *testing.T) {
	// Every example module (the demo driver beside them is a vigil dev
	// session, not a module).
	modules := []string{"./examples/clusterconfig", "./examples/labeler", "./examples/phases"}
	out, err := exec.Command("go", append([]string{"list", "-deps"}, modules...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps %v: %v\n%s", modules, err, out)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "github.com/vigilkit/vigil/internal/commands/modcli") {
		t.Fatalf("the examples do not link internal/commands/modcli; go list printed:\n%s", out)
	}
	// The image has no CA bundle: the binary carries the roots HTTPS needs.
	if !slices.Contains(deps, "golang.org/x/crypto/x509roots/fallback") {
		t.Errorf("the examples do not link golang.org/x/crypto/x509roots/fallback: HTTPS from their images would trust no root")
	}
	for _, dep := range deps {
		switch {
		case dep == "github.com/vigilkit/vigil/internal/commands/cli",
			dep == "github.com/vigilkit/vigil/internal/clusters/controlplane",
			dep == "github.com/vigilkit/vigil/internal/commands/dev",
			strings.HasPrefix(dep, "golang.org/x/mod"),
			strings.Contains(dep, "scaffold"):
			t.Errorf("a module binary links %s", dep)
		}
	}
}
