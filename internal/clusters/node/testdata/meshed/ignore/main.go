// Command ignore is the module of the deadlock test whose Pod policy
// answers Ignore in istio-system when the module cannot be reached, as
// UDS Core's does: the injector's pods come back first, then the module's.
package main

import (
	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/clusters/node/testdata/meshed"
)

func main() {
	m := vigil.NewModule("meshed", vigil.Options{Namespace: meshed.Namespace})
	meshed.Policies(m.Capability("policies", vigil.FailurePolicyIn(admission.Ignore, meshed.Mesh)))
	vigil.Run(m)
}
