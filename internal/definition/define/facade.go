package define

import (
	"github.com/vigilkit/vigil/internal/definition/scheme"
	"github.com/vigilkit/vigil/internal/definition/spec"
)

// facade returns the definition behind a module of package vigil (a
// *vigil.Module); package vigil sets it with SetFacade when it loads.
var facade func(module any) (*Module, bool)

// SetFacade is called once, by package vigil, with how to reach the
// definition behind its Module.
func SetFacade(f func(module any) (*Module, bool)) { facade = f }

// Resolved is the spec of a module of package vigil, its scheme complete as
// the admission and watcher roles complete it, and the mistakes of its
// definition (Verify's); ok is false for anything else. The kit's in-process
// runs (vigiltest) reach a module's definition here.
func Resolved(module any) (m *spec.Module, mistakes error, ok bool) {
	if facade == nil {
		return nil, nil, false
	}
	d, ok := facade(module)
	if !ok {
		return nil, nil, false
	}
	scheme.Complete(d.Scheme)
	return d.Resolve(), d.Verify(), true
}
