// Package library is not a main package, for vigil dev's tests.
package library
