// Package audit runs a module's validations over the objects that exist and
// reports what they deny: what passed before the webhooks enforced, while
// a capability was in Warn or Audit mode, during an outage under
// failurePolicy Ignore, or under an older policy. The watcher's active
// replica runs it once the webhooks are enforced and then periodically.
//
// Findings are reported as Warning Events on the objects, log lines and
// metrics; each run keeps a report per capability in the module's Store and,
// where the cluster serves them, PolicyReports (wgpolicyk8s.io/v1alpha2).
// Objects created while a capability's webhook was failed open — the windows
// the registration record keeps — are reported as such, mutations that did
// not run included.
//
// Each kind is streamed, an object at a time, in one request where the API
// server streams lists (eachStreamed), and listed a page at a time
// (Auditor.PageSize, DefaultPageSize) where it does not, or where a stream
// ends early or falls silent (DefaultStreamSilence). Each object is
// dropped once judged: the audit's memory is bounded by the largest object
// and the connection's buffers, or by the page, and what it keeps grows
// only with the findings.
package audit
