package arch

import (
	"strings"
	"testing"
)

// A role imports no other role: what two roles share (informers, the
// admission engine, registration) lives below them, so that each role's
// package says all it does.
func TestRolesDoNotImportEachOther(t *testing.T) {
	const roles = "internal/roles/"
	for _, p := range list(t) {
		from := rel(p.ImportPath)
		if !strings.HasPrefix(from, roles) {
			continue
		}
		for _, imp := range p.Imports {
			if to := rel(imp); strings.HasPrefix(to, roles) && to != from {
				t.Errorf("role %s imports role %s: move what both need below internal/roles (internal/runtime, internal/serving)", from, to)
			}
		}
	}
}
