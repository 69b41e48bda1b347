// Package kubeversion is the one place that names the Kubernetes releases
// vigil supports, the default among them, and the etcd each release runs
// with.
//
// Every tool that builds or starts a control plane or a node, renders a chart
// or compiles CEL takes a Release from here: `--kubernetes 1.34` on the
// command line, VIGIL_KUBERNETES_VERSION in the environment of `make test` and
// the examples' tests, vigiltest.Options.KubernetesVersion in a module's own
// tests. A version outside the range is refused with the list of supported
// ones.
//
// Features records which Kubernetes version serves each API a module's
// declarations need, for the docs and for the errors that refuse a module
// the cluster cannot serve.
package kubeversion
