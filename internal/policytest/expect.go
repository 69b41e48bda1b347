package policytest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// Diff says how r differs from what c expects, one line per difference;
// none when the case passes.
func Diff(c Case, r Result) []string {
	var out []string
	e := c.Expect
	if *e.Allowed != r.Allowed {
		want, got := verdict(*e.Allowed), verdict(r.Allowed)
		line := fmt.Sprintf("expected %s, got %s", want, got)
		if !r.Allowed {
			line += fmt.Sprintf(" by %s: %q", r.Webhook, r.Message)
		}
		if len(r.Webhooks) == 0 {
			line += " (no webhook of the module matches the request: check its kind, operation and namespace)"
		}
		out = append(out, line)
	}
	if e.Message != "" && !strings.Contains(r.Message, e.Message) {
		out = append(out, fmt.Sprintf("expected the message to contain %q, got %q", e.Message, r.Message))
	}
	for _, w := range e.Warnings {
		if !slices.ContainsFunc(r.Warnings, func(got string) bool { return strings.Contains(got, w) }) {
			out = append(out, fmt.Sprintf("expected a warning containing %q, got %s", w, quoted(r.Warnings)))
		}
	}
	for _, p := range e.Patch {
		if !slices.ContainsFunc(r.Patch, p.matches) {
			out = append(out, fmt.Sprintf("expected the patch to %s, got %s", p, patchString(r.Patch)))
		}
	}
	return out
}

// matches reports whether got is the operation p expects: the same op and
// path, and the same value when p gives one.
func (p PatchOp) matches(got PatchOp) bool {
	if p.Op != got.Op || p.Path != got.Path {
		return false
	}
	if len(p.Value) == 0 {
		return true
	}
	var want, have any
	if json.Unmarshal(p.Value, &want) != nil || json.Unmarshal(got.Value, &have) != nil {
		return false
	}
	return reflect.DeepEqual(want, have)
}

func verdict(allowed bool) string {
	if allowed {
		return "allowed"
	}
	return "denied"
}

func quoted(ss []string) string {
	if len(ss) == 0 {
		return "none"
	}
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

func patchString(ops []PatchOp) string {
	if len(ops) == 0 {
		return "no patch"
	}
	s := make([]string, len(ops))
	for i, p := range ops {
		s[i] = p.String()
	}
	return "[" + strings.Join(s, "; ") + "]"
}
