// Package pattern compiles and matches the regular expressions tenants
// write — an Exemption's matcher.name, a label selector's value pattern —
// under a budget, so that no expression, and no request, costs the module
// more than its author allowed.
//
// A tenant's expression is untrusted input: Go's regexp expands counted
// repetitions when it compiles (`[a-z]{0,1000}` a thousand times is 13 KB of
// text that RE2 accepts and compiles to hundreds of MB), and a backtracking
// engine such as regexp2's ECMAScript mode matches `(a+)+b` against a run of
// a's in exponential time. A Set bounds both:
//
//   - each expression's length (Options.MaxLength, in bytes) and the size of
//     its compiled program (Options.MaxSize: for RE2, counted repetitions
//     expanded and then syntax.Compile's instructions, both checked before
//     regexp.Compile allocates anything; for ECMAScript, the counted
//     repetitions' expansion and regexp2's program), refused with an error
//     that names the expression, the bound and what was seen;
//   - each distinct text is compiled once per process, not once per request:
//     compiled patterns (and refusals) are kept in a cache bounded by the
//     total size of their programs (Options.MaxCached), least recently used
//     dropped first;
//   - a Matcher holds one request's matching: every Match checks the
//     request's context first and stops at its deadline, and all its
//     matches together may take at most Options.Work; past either, Match
//     returns an error wrapping ErrStopped, and a loop over many entries
//     stops there. One ECMAScript match gives up after Options.MatchTimeout
//     (RE2 matches in time linear in the text and the bounded program).
//
// A validation calls Set.Check on every expression an object carries and
// refuses the object with the error; a review that matches a name against
// stored expressions — which may have been written while the module was
// down, so never passed the validation — makes one Matcher from the
// request's context and calls Match for each, skipping an entry whose
// expression is refused and stopping at ErrStopped:
//
//	var names = pattern.New(pattern.Options{Syntax: pattern.ECMAScript, Whole: true})
//
//	m := names.Matcher(ctx)
//	for _, e := range entries {
//		ok, err := m.Match(e.Name, pod.Name)
//		if errors.Is(err, pattern.ErrStopped) {
//			return deny(err) // the request's budget is spent
//		}
//		if ok { ... }
//	}
//
// regexp2's timeout clock ticks every 100ms by default, so a 50ms timeout
// took up to 250ms; importing this package makes it tick every 10ms, so a
// match ends within about MatchTimeout plus 20ms.
package pattern
