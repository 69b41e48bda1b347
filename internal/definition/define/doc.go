// Package define holds the machinery behind the facade's builders: a gate as
// it is being declared (its options, its one outcome and its one callback,
// each checked as it is set), the checks only the whole definition allows
// (two gates with one name, an outcome missing), and the typed helpers the
// generic builders share (converting unstructured objects to the author's
// types, typed predicates, sampling). Resolve turns a declared gate into the
// spec.Gate every role reads. Env and Mount are the author's variables and
// volumes as declared, checked alone and, with the gates, together (a phase
// no gate runs in, a variable twice in a container, overlapping mounts).
//
// Its functions return errors; the facade records them with the call site
// of the author's declaration.
package define
