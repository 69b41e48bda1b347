// Package k8sbuild builds the Kubernetes binaries vigil runs, for any
// supported release (package kubeversion): kube-apiserver, etcd and kubectl
// for a control plane, and kubelet, kube-proxy, kube-controller-manager and
// kube-scheduler for a node.
//
// The binaries are not downloaded: they are compiled from the Go module proxy,
// the one registry every machine that builds Go code can reach. Kubernetes
// cannot be a dependency of an ordinary module (its go.mod replaces its
// staging modules with local folders), and neither can the etcd server (its
// go.mod points its sibling modules at ../), so Ensure writes a scratch
// module outside the caller's module for each, pinning every replaced module
// to the matching published version, builds the commands, checks that each
// reports its release, and installs them into a cache folder named after the
// versions (k8s-v1.34.4-etcd-v3.6.4, k8s-v1.34.4-node).
//
// The build runs under a file lock, into a temporary folder that is renamed
// into place only when every binary has been built and has reported its
// version, so parallel callers build once and a failed or interrupted build
// leaves nothing half-finished behind. A cold build takes 6 to 12 minutes on
// two cores per release; afterwards Ensure returns at once.
//
// The package needs nothing but the go command and golang.org/x/mod, so the
// program that builds a control plane (hack/control-plane) compiles in
// seconds on a fresh machine and starts the build at once.
package k8sbuild
