// Package v1 is a kind of a module's own, for the generator's test.
// +groupName=example.dev
package v1
