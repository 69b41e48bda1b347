// Package zarf writes a module's Zarf package definition, as UDS ships its
// parts: zarf.yaml naming the module's chart (written beside it) and its
// image, so that `zarf package create` builds an air-gap package of the
// module and a UDS bundle can take it.
package zarf
