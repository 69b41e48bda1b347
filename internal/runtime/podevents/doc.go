// Package podevents records Kubernetes Events on the Pod a role runs in, when
// the downward API names it (POD_NAME, POD_NAMESPACE, POD_UID): a gate phase's
// changes of state on its init container, the admission role's registration
// problems on its Pod.
package podevents
