// Package admission holds what a module author's admission handlers see and
// return: the typed Request a mutation edits or a validation judges, the
// Verdict a validation answers with (Allow, Deny, DenyCode, Warn), and the
// FailurePolicy that answers for a binding that fails.
//
// Bindings are declared with vigil.When on a capability; the engine that
// serves them (the AdmissionReview handler, patches, metrics) is internal to
// vigil.
package admission
