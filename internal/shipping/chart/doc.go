// Package chart writes a module's Helm chart from the same objects
// internal/shipping/manifests renders, so that the two cannot drift: every object is
// rendered once, the fields the chart's values drive (image, replicas,
// resources and the GOMEMLIMIT derived from them, scheduling, extra env and
// volumes, the log level, the serving certificate, the admission pods'
// NetworkPolicy and its peers) are replaced by template
// expressions, and everything else is copied as rendered. With default
// values the chart renders exactly what `<module> manifests` prints, on a
// cluster that serves no Prometheus Operator API.
//
// Besides those objects the chart carries the module's monitoring, each
// part behind a value: a ServiceMonitor of the metrics Services and a
// PrometheusRule of the module's alerts, rendered only where the cluster
// serves their kinds, and a Grafana dashboard in a ConfigMap for Grafana's
// sidecar, off by default. Their queries read only what the module
// registers, scoped to it by its module label.
//
// Values reach the module only as flags and env of its containers: the
// webhooks it registers at run time are not in the chart. The Store CRD,
// shared by every vigil module, ships in crds/ so that uninstalling one
// module never deletes it. A pre-delete hook Job, with its own
// ServiceAccount and RBAC, stops the watcher and runs
// `<module> unregister --remove-finalizers --delete-state` before Helm
// deletes anything.
package chart
