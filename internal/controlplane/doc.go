// Package controlplane provides vigil's embedded Kubernetes control plane: a real
// kube-apiserver and etcd, with the kubectl of the same release, for tests and for
// `vigil dev` and `vigil controlplane up`.
//
// The binaries are not downloaded: they are compiled from the Go module proxy, the
// one registry every machine that builds Go code can reach. Ensure writes two
// scratch modules outside the caller's module (Kubernetes cannot be a dependency of
// an ordinary module: its go.mod replaces its staging modules with local folders,
// so the scratch module pins each of them to the matching published version),
// builds kube-apiserver, kubectl and etcd, and installs them into a cache folder
// named after both versions. The build runs under a file lock, into a temporary
// folder that is renamed into place only when every binary has been built and has
// reported its version, so parallel callers build once and an interrupted build
// leaves nothing half-finished behind. A cold build takes 6 to 12 minutes on
// two cores; afterwards Ensure returns at once.
//
// Start runs those binaries through controller-runtime's envtest and returns a
// running instance with an admin rest.Config whose client-side rate limits are set
// deliberately.
package controlplane
