// Command builders writes builders_gen.go in package vigil: every option of
// the admission, watch and gate builders spelled out on each concrete
// builder type, from one template (methods.go.tmpl), so that `go doc` shows
// an author the builder's own type in every signature, as controller-runtime's
// builder does, and no type parameter standing for it.
//
//	go run ./hack/builders        # from the repository's root; go generate runs it
package main
