package vigil_test

import (
	"strings"
	"testing"

	"github.com/vigilkit/vigil"
)

// A trusted namespace or the provenance declared wrong is a definition
// mistake named at its call.
func TestTrustMistakes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		declare func(m *vigil.Module)
		want    string
	}{
		{"not a namespace name", func(m *vigil.Module) { vigil.TrustedNamespace(m, "Not_A_Name") }, "not a namespace name"},
		{"the module's own", func(m *vigil.Module) { vigil.TrustedNamespace(m, "mod-system") }, "the module's own namespace"},
		{"kubernetes'", func(m *vigil.Module) { vigil.TrustedNamespace(m, "kube-public") }, "one of Kubernetes' own namespaces"},
		{"twice", func(m *vigil.Module) { vigil.TrustedNamespace(m, "trusted"); vigil.TrustedNamespace(m, "trusted") }, "already declared at trust_test.go:"},
		{"empty group", func(m *vigil.Module) { vigil.TrustedNamespace(m, "trusted", "group:") }, `allowed "group:"`},
		{"a comma", func(m *vigil.Module) { vigil.NamespaceProvenance(m, "group:a,b") }, "without commas"},
		{"provenance twice", func(m *vigil.Module) { vigil.NamespaceProvenance(m); vigil.NamespaceProvenance(m) }, "NamespaceProvenance: already declared"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := vigil.NewModule("mod", vigil.Options{Namespace: "mod-system"})
			tc.declare(m)
			err := m.Verify()
			if err == nil {
				t.Fatal("Verify() = nil, want the mistake")
			}
			for _, w := range []string{"trust_test.go:", tc.want} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Verify() = %q, want it to contain %q", err, w)
				}
			}
		})
	}
	m := vigil.NewModule("mod", vigil.Options{Namespace: "mod-system"})
	ex := vigil.TrustedNamespace(m, "mod-exemptions")
	p := vigil.NamespaceProvenance(m, "system:serviceaccount:ci:deployer", "group:platform")
	if err := m.Verify(); err != nil {
		t.Fatalf("well-formed declarations: %v", err)
	}
	if ex.Name() != "mod-exemptions" || strings.Join(ex.Allowed(), ",") != "group:system:masters" || len(p.Allowed()) != 2 {
		t.Errorf("TrustedNamespace %s allows %v, provenance allows %v; want group:system:masters by default and the two named", ex.Name(), ex.Allowed(), p.Allowed())
	}
}
