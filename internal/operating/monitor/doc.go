// Package monitor follows a module's admission decisions as they happen, for
// `vigil monitor`: it reads the log of the admission container of each of
// the module's pods through the API server (pods/log, which a cluster viewer
// may read), takes the lines whose event is events.Decision — one per
// answered request, at most VIGIL_DECISION_LOG a second per replica — and
// hands each on as a Decision, filtered by the object's namespace, the
// capability and the verdict. Pods that start later (a rollout, a restart)
// are followed as they come.
package monitor
