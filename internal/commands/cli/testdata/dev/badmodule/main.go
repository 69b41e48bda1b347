// Command badmodule is a module with a definition mistake, for vigil dev's
// tests: a capability name that is not a DNS-1123 label.
package main

import "github.com/vigilkit/vigil"

func main() {
	m := vigil.NewModule("badmodule", vigil.Options{})
	m.Capability("Not_A_Label")
	vigil.Run(m)
}
