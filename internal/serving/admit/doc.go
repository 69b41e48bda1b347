// Package admit is the admission engine: it turns AdmissionReview requests
// into answers by running a module's bindings.
//
// A binding says which objects it is for (a kind, operations, in-process
// filters on namespace, name, labels and annotations) and what it does: a
// mutation edits the typed object of the request, and the handler sends the
// API server a JSON patch from the object as it came to the object as the
// mutations left it; a validation returns an admission.Verdict — allow, deny
// with a message and code, or allow with warnings. Bindings run in the order
// they were declared; mutations accumulate, each seeing the edits of those
// before it.
//
// With Options.Recheck, a binding runs with a record of its lister reads in
// its context (internal/serving/fresh). When it denies (a mutation: fails) after
// reading a lister, or when a read found an object, its verdict may rest on a
// cache that lags the API server: the handler waits until the listers it read
// have caught up and runs it once more — a mutation from the object as it was
// before it — and that second answer stands. A wait that cannot finish before
// the deadline is answered by the failure policy.
//
// Bindings are served on /mutate/<module> and /validate/<module>, except
// those of a capability with an opt-out label, served on its own path
// (CapabilityPath) and only there: its webhooks skip what the label opts out,
// so the other capabilities' webhooks must not run its bindings, nor its own
// theirs.
//
// The handler answers every request, whatever its bindings do. A binding that
// returns an error, panics, or is still running when the handler's deadline
// comes (set below the webhook's timeoutSeconds, so the API server always gets
// an answer) is answered by the module's failure policy: Fail denies with a
// message naming the capability and binding, Ignore allows with a warning.
//
// Nothing unattributed is allowed silently. A request for a path the module
// does not serve, or for a kind and operation none of the path's bindings is
// for (a Pod validation handed a ConfigMap), is answered by the failure
// policy with a message naming what was expected, logged, and counted in
// vigil_admission_unattributed_total{reason, answer}. The one exception is a
// rollout: an older replica receives what only the newer version serves, and
// allows it — counted with answer newer_version — while, and only while, a
// newer version is registered (Options.Newer). A binding's filters are not
// part of attribution: a request they do not match is allowed. Malformed
// requests get a 4xx saying what was expected.
//
// A request passes through the files in this order: transport.go reads it
// (method, content type, body limit) and writes the answer; decode.go
// decodes the AdmissionReview; attribute.go and paths.go find what it is
// for; engine.go reviews it — reviewRun.review, the one review function,
// which the audit (audit.go) calls too — with objects.go keeping the
// objects and making the patch. Each binding's outcome goes through the
// stages, each in its own file: recheck.go (decided again on fresh data),
// metrics.go (counted), failure.go (a failure, panic or timeout answered by
// the failure policy) and mode.go (a denial enforced, warned or recorded).
package admit
