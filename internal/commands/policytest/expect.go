package policytest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
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
// path, and the same value when p gives one. An add p is also made by an
// add (or replace) of one of its parents whose value holds p's at the rest
// of its path: a label added with the whole labels map the object lacked.
func (p PatchOp) matches(got PatchOp) bool {
	var want, have any
	if len(p.Value) > 0 && json.Unmarshal(p.Value, &want) != nil {
		return false
	}
	if len(got.Value) > 0 && json.Unmarshal(got.Value, &have) != nil {
		return false
	}
	if p.Op == got.Op && p.Path == got.Path {
		return len(p.Value) == 0 || reflect.DeepEqual(want, have)
	}
	rest, ok := strings.CutPrefix(p.Path, got.Path+"/")
	if p.Op != "add" || (got.Op != "add" && got.Op != "replace") || !ok {
		return false
	}
	for _, token := range strings.Split(rest, "/") {
		token = strings.NewReplacer("~1", "/", "~0", "~").Replace(token)
		switch v := have.(type) {
		case map[string]any:
			if have, ok = v[token]; !ok {
				return false
			}
		case []any:
			i, err := strconv.Atoi(token)
			if err != nil || i < 0 || i >= len(v) {
				return false
			}
			have = v[i]
		default:
			return false
		}
	}
	return len(p.Value) == 0 || reflect.DeepEqual(want, have)
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
