// Package status reads what a cluster shows of its vigil modules, with a
// cluster viewer's rights, into one report (Report, SchemaVersion) that
// `vigil status` prints as text or JSON: each module's version and the
// fingerprint of its definition, its replicas ready per role, each pod still
// starting (which phase, which gate, what it waits for, since when and what
// it last saw: the gate's Events on its init container), the registration
// of each webhook configuration (the vigil.dev/registration annotation:
// probing, proving, enforced, failed open, with times), the drifts repaired
// (the admission role's Events), the outage windows, the audit's
// PolicyReports, and the cluster's other webhooks that intercept the
// module's pods — with the deadlocks among them (internal/operating/deadlock).
//
// A right the reader lacks does not stop the report: what it could not
// read is named in Report.Missing, with the verb and resource to grant.
package status
