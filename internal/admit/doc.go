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
// message naming the capability and binding, Ignore allows with a warning. A
// request for a path this process does not serve — another version of the
// module during a rollout — is allowed and logged, never rejected. Malformed
// requests get a 4xx saying what was expected.
package admit
