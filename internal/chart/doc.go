// Package chart writes a module's Helm chart from the same objects
// internal/manifests renders, so that the two cannot drift: every object is
// rendered once, the fields the chart's values drive (image, replicas,
// resources and the GOMEMLIMIT derived from them, scheduling, extra env and
// volumes, the log level, the serving certificate, the admission pods'
// NetworkPolicy and its peers) are replaced by template
// expressions, and everything else is copied as rendered. With default
// values the chart renders exactly what `<module> manifests` prints.
//
// Values reach the module only as flags and env of its containers: the
// webhooks it registers at run time are not in the chart. The Store CRD,
// shared by every vigil module, ships in crds/ so that uninstalling one
// module never deletes it. A pre-delete hook Job, with its own
// ServiceAccount and RBAC, stops the watcher and runs
// `<module> unregister --remove-finalizers --delete-state` before Helm
// deletes anything.
package chart
