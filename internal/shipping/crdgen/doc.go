// Package crdgen writes the CustomResourceDefinitions of a module's own Go
// types, with controller-tools' CRD generator (the library controller-gen
// runs): the types' kubebuilder markers make the schema, and the files it
// writes are what vigil.CRDs ships with the module (`vigil crds`).
package crdgen
