// Package manifests derives a module's Kubernetes objects from its resolved
// definition (internal/definition/spec): its ServiceAccount and least-privilege RBAC (every rule with the
// gate, binding or feature that needs it), the admission Deployment whose init
// containers run the gate phases in order, the watcher Deployment, Services,
// the Store CRD and the webhook configurations. Nothing is written by hand, so
// nothing can drift from the code; the same module and options always render
// the same bytes.
package manifests
