package vigil

import (
	"github.com/go-logr/logr"

	"github.com/vigilkit/vigil/internal/serving/admit"
)

// AdmissionHandlerOf serves the module's admission bindings in process, as
// its admission role does, with no API server: for tests of what a binding
// sees and answers.
func AdmissionHandlerOf(m *Module) *admit.Handler {
	s := m.d.Resolve()
	return admit.NewHandler(s.Bindings, admit.Options{Module: s.Name, FailurePolicy: s.FailurePolicy, Log: logr.Discard()})
}

// MutatePath and ValidatePath are the paths AdmissionHandlerOf serves the
// module's mutations and validations on.
var (
	MutatePath   = admit.MutatePath
	ValidatePath = admit.ValidatePath
)
