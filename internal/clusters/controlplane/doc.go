// Package controlplane runs vigil's embedded Kubernetes control plane: a
// real kube-apiserver and etcd of a supported release (package kubeversion),
// with the kubectl of the same release, for tests and for `vigil dev` and
// `vigil controlplane up`.
//
// The binaries come from package k8sbuild, which compiles them from the Go
// module proxy into a cache folder per release; FindBinaries finds them
// there (or in $KUBEBUILDER_ASSETS) and Ensure builds them when missing.
//
// Start runs them through controller-runtime's envtest and returns a running
// instance with an admin rest.Config whose client-side rate limits are set
// deliberately. On the releases where a kind vigil uses is served only once
// enabled (MutatingAdmissionPolicy before 1.36), Start enables it, as a
// platform that uses the feature must (ServingFlags); a test of a cluster
// that does not serve it turns the flags off with APIServerFlags.
package controlplane
