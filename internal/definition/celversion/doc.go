// Package celversion compiles CEL as the API server of a given Kubernetes
// release does: with that release's base environment (its libraries,
// language settings and validators, as k8s.io/apiserver's environment
// package versions them), so that an expression that the oldest release a
// module targets would refuse is refused offline, at its call site, in the
// API server's own words, with the library it needs and the first release
// whose API server accepts it. A release compiles a new expression at its
// minimum compatibility version, the minor before it, so a library is
// accepted one release after the one that added it.
package celversion
