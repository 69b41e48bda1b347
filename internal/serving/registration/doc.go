// Package registration fills a module's webhook configurations from the
// running module, once it is ready, so that the API server never rejects a
// request because the module is not there yet.
//
// The module's manifests ship its MutatingWebhookConfiguration and
// ValidatingWebhookConfiguration empty, named after the module (Bootstrap);
// the module may only get and patch those two (Rule) — it cannot create any
// other, and uninstalling the manifests removes them. The canary needs one
// rule more in the module's own namespace (CanaryRule): create on ConfigMaps,
// only ever used as a dry run.
//
// An admission replica whose readiness passes registers in three steps:
//
//  1. it fills the configurations from its bindings with failurePolicy
//     Ignore: rules de-duplicated, and the module's exclusion policy
//     (spec.ExclusionPolicy) rendered: namespaces excluded (the module's
//     own, kube-system and kube-node-lease), match conditions that keep
//     Nodes, Leases and CSRs away (spec.Plumbing) and exclude exactly the
//     objects the module's gates wait for
//     (GatedObjects: spec.Module.Exclusions, each one object by kind,
//     namespace and name, or cluster-scoped; VerifyExclusions asks the API
//     server the scope of the kinds the definition cannot place), and the
//     caBundle;
//  2. it proves the API server can reach a replica: a canary webhook, which
//     matches one labelled ConfigMap in the module's namespace, is called by a
//     server-side dry-run create of that ConfigMap, and whichever replica
//     answers echoes the canary's token as a warning, which the API server
//     passes back to the registering replica;
//  3. only then it switches the webhooks to the module's failure policy.
//
// Only a first install starts at Ignore ("probing"). Once the webhooks were
// enforced — a Record of either configuration says enforced, proving or
// failed-open, or this Registrar enforced them — a new client configuration
// or caBundle is proven on the canary alone while every webhook stays at its
// enforced policy on the client configuration it had ("proving"); then one
// write per configuration switches them. A configuration emptied or
// re-created after enforcement (no webhooks, no Record) is restored at its
// enforced policy at once: it admitted everything already, and starting at
// Ignore would only stretch that. Without any Record and without its own
// memory of enforcing, a replica cannot tell such a configuration from a
// first install, and registers it as one: the Record is the module's memory.
//
// The canary is a mutating webhook, Ignore, matching only the canary
// ConfigMap: the API server calls mutating webhooks before any
// ValidatingAdmissionPolicy or validating webhook, so another policy that
// refuses the ConfigMap cannot keep it from the module, and the warning the
// module echoed stays on the refused answer (reached counts it). A canary
// that does not come back for StuckAfter is reported (OnStuck, the Record's
// Problem) with what refused it, not as missing RBAC.
//
// Nothing else is skipped, unless a capability has an opt-out label
// (spec.OptOut): its webhooks then skip namespaces labelled with it
// (namespaceSelector) and objects labelled with it (objectSelector), and are
// served on the capability's own path (admit.CapabilityPath), so that the
// other capabilities' webhooks never run its bindings. Who may set the label
// is enforced by a Guard per such capability: a ValidatingAdmissionPolicy and
// its binding, without selectors, evaluated by the API server itself, which
// the manifests ship and --bootstrap creates (EnsurePolicies). Exclusions says
// all of it in words, for plan.
//
// A capability's checks (spec.Check, the facade's Require) are no webhooks:
// each is a ValidatingAdmissionPolicy and its binding (Checks) that the API
// server evaluates itself, shipped and created beside the guards, matching
// what the capability's webhooks would.
//
// A module's trusted namespaces (spec.TrustedNamespace) and its namespace
// provenance (spec.Provenance) are no webhooks either: TrustedGuards refuse
// creating, deleting and relabelling each trusted namespace to all but its
// allowed; Stamps, a MutatingAdmissionPolicy, record every Namespace's
// creator at its CREATE, and ProvenanceGuards refuse changing that record.
// Who is allowed sits in the variables AllowedUsersVar and AllowedGroupsVar,
// JSON lists the chart extends with its trusted.allowed value. EnsurePolicies
// creates the trusted namespaces first, then the stamps and the guards, as
// the manifests order them.
//
// Writes are JSON merge patches carrying the configuration's resourceVersion
// (compare-and-swap) and an annotation with the module's version, a hash of
// its bindings and a generation. A replica never overwrites a configuration
// written by a newer version of the module while that version runs, so
// during a rollout old and new replicas do not fight: each version's ready
// replicas renew a Lease (LeaseName), and an older version takes the
// registration over once the newer one's Lease lapsed (a rollback; see
// lease.go). Newer tells an older replica that a newer version
// registered, so that its admission handler allows what only the newer one
// serves. A replica's stop never removes the configurations;
// Unregister empties them at uninstall. A configuration an admin deleted is
// reported, not recreated.
//
// The registrar is the one writer of the configurations' webhooks, and keeps
// them true: Sync compares both with the module's spec (the webhooks list,
// rules, selectors, failure policy, timeout, match conditions, client
// configuration and caBundle, the API server's defaults filled in) and the
// Record, and repairs what differs with the same state machine — through
// probing and the canary when reachability is in question, straight to
// enforced when only what is matched or how it fails changed. It returns the
// drift in words, for the caller to report (OnDrift tells it before the
// repair is written). The manifests ship the configurations without a
// webhooks field, so applying them cannot fight the registrar.
//
// The one other write is FailOpen's, for capabilities that declared an
// outage bound (spec.FailOpen): WatchOutages, on the watcher's leader,
// dry-runs the canary and, once no replica has answered for a capability's
// bound, sets that capability's webhooks to Ignore and the Record's state to
// "failed-open", compare-and-swap as the registrar writes. Sync reads that
// state as neither drift nor a reason to probe with everything Ignore: it
// proves with the canary that a replica serves, then enforces again.
package registration
