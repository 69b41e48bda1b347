// Package admissionrole runs a module's admission role, `<module> admission`:
// the HTTPS server of its webhooks (internal/serving/webhook) with the serving
// certificate from files or a managed Secret (internal/serving/certs), the Store and
// the listers' informers, readiness (the gates' handoff, the Store and the
// listers synced), registration when ready (internal/serving/registration: Ignore,
// the canary, then the failure policy) and the checks that keep it true, and
// `<module> unregister` (the audit of what got in is the watcher's). It
// tells the handler whether a newer version of the module registered the
// webhooks (rollout.go), the one case in which a request this version does
// not serve is allowed rather than answered by the failure policy.
//
// It reads the module's resolved definition (internal/definition/spec) and nothing else
// of the module.
package admissionrole
