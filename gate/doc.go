// Package gate holds the conditions a startup gate waits for.
//
// A module declares what must exist in the cluster before it may serve:
//
//	vigil.WaitFor(m, &apiextensionsv1.CustomResourceDefinition{}).
//		WithName("clusterconfigs.uds.dev").
//		ToBe(gate.Established())
//
// The engine that runs gates watches the selected objects as
// *unstructured.Unstructured and calls the condition on every change. A
// condition is a plain, non-generic value of the interface type [Cond], so
// ToBe(gate.Ready()) compiles for a gate of any kind without type parameters.
// Typed predicates over the gate's own Go type do not belong here: they go
// through ToMatch, which converts the object before calling them.
//
// A condition sees either the object or an untyped nil pointer when no such
// object exists, so "does not exist yet" and "is gone" are ordinary inputs
// rather than errors. Check never fails: what cannot be decided yet (a status
// not written, a field missing, a CEL expression that runs into a missing key)
// is simply "not yet", with a short reason for the progress log.
//
// Conditions that can be wrong in a definition implement [Validator], so a bad
// CEL or JSONPath expression, or Established on a kind that is not a
// CustomResourceDefinition, fails when the module starts instead of waiting
// forever. Conditions that remember what they saw during one wait implement
// [Stateful]; the engine asks them for a fresh copy per wait.
//
// The built-in conditions are:
//
//   - [Created]: the object exists.
//   - [Gone]: the object is gone, or was replaced by one with a new UID.
//   - [Established]: a CustomResourceDefinition is Established and its names
//     are accepted, so its kind is served.
//   - [Ready]: kstatus computes Current for the object, the readiness rules
//     that Flux and kpt apply.
//   - [Condition]: one status.conditions entry has the wanted status and is
//     not stale.
//   - [JSONPath]: a field has a value, as kubectl wait --for=jsonpath does.
//   - [CEL]: a CEL expression over the object is true.
//   - [And], [Or] and [Not] combine them.
//
// [Permanent] marks an error from a gate callback as one that retrying cannot
// fix, so the phase fails at once instead of backing off until its timeout.
package gate
