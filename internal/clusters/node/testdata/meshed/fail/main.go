// Command fail is the module of the deadlock test whose Pod policy fails
// closed everywhere, istio-system too, where the sidecar injector's own
// pods are created, while the injector fails closed on the module's pods.
package main

import (
	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/internal/clusters/node/testdata/meshed"
)

func main() {
	m := vigil.NewModule("meshed", vigil.Options{Namespace: meshed.Namespace})
	meshed.Policies(m.Capability("policies"))
	vigil.Run(m)
}
