package pattern

import (
	"regexp/syntax"
	"strings"
)

// most caps the sizes computed below, so that nested counted repetitions
// do not overflow: any budget is far below it.
const most = 1 << 30

// add and mul are + and *, capped at most.
func add(a, b int) int { return min(a+b, most) }

func mul(a, b int) int {
	if a != 0 && b > most/a {
		return most
	}
	return min(a*b, most)
}

// times is how many copies of its operand a repetition x{min,max} makes:
// max, or min+1 when unbounded, and at least one.
func times(lo, hi int) int {
	if hi < 0 {
		hi = lo + 1
	}
	return max(hi, 1)
}

// re2Size is the number of nodes the parsed expression has once each
// counted repetition is copied out, as Simplify does: a bound, within a
// small factor, of its instructions, computed without making them.
func re2Size(re *syntax.Regexp) int {
	n := max(1, len(re.Rune))
	if re.Op == syntax.OpCharClass {
		n = 1
	}
	for _, sub := range re.Sub {
		n = add(n, re2Size(sub))
	}
	if re.Op == syntax.OpRepeat {
		n = add(1, mul(n-1, times(re.Min, re.Max)))
	}
	return n
}

// ecmaSize is the same bound for an ECMAScript expression, read from its
// text: each atom (a character, an escape, a class) counts one, a group
// its contents plus one, and a counted repetition multiplies the atom or
// group before it. What does not parse counts as literal characters;
// regexp2 refuses it afterwards.
func ecmaSize(expr string) int {
	// Each open group: its size so far, and that of its last atom.
	type group struct{ total, last int }
	stack := []group{{}}
	atom := func(n int) {
		top := &stack[len(stack)-1]
		top.total, top.last = add(top.total, n), n
	}
	for i := 0; i < len(expr); i++ {
		switch c := expr[i]; c {
		case '\\':
			i++
			atom(1)
		case '[':
			for i++; i < len(expr) && expr[i] != ']'; i++ {
				if expr[i] == '\\' {
					i++
				}
			}
			atom(1)
		case '(':
			if strings.HasPrefix(expr[i:], "(?") {
				// (?:, (?=, (?!, (?<=, (?<!, (?<name>: skip the marker.
				if j := strings.IndexAny(expr[i+2:], ":=!>"); j >= 0 {
					i += 2 + j
				}
			}
			stack = append(stack, group{})
		case ')':
			if len(stack) == 1 {
				atom(1)
				continue
			}
			done := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			atom(add(done.total, 1))
		case '*', '+', '?':
			top := &stack[len(stack)-1]
			top.total = add(top.total, 1)
		case '{':
			lo, hi, n, ok := counted(expr[i:])
			if !ok {
				atom(1)
				continue
			}
			i += n - 1
			top := &stack[len(stack)-1]
			copies := mul(top.last, times(lo, hi))
			top.total = add(top.total-top.last, add(copies, 1))
			top.last = copies
		default:
			atom(1)
		}
	}
	total := 0
	for _, g := range stack {
		total = add(total, g.total)
	}
	return total
}

// counted parses a counted repetition at the start of s: {n}, {n,} or
// {n,m}, its length, and false when s does not start with one. An
// unbounded one has hi -1; a count past most is most.
func counted(s string) (lo, hi, n int, ok bool) {
	end := strings.IndexByte(s, '}')
	if end < 0 {
		return 0, 0, 0, false
	}
	a, b, comma := strings.Cut(s[1:end], ",")
	if lo, ok = number(a); !ok {
		return 0, 0, 0, false
	}
	switch {
	case !comma:
		hi = lo
	case b == "":
		hi = -1
	default:
		if hi, ok = number(b); !ok {
			return 0, 0, 0, false
		}
	}
	return lo, hi, end + 1, true
}

// number is the decimal s, capped at most; false when s is not one.
func number(s string) (int, bool) {
	if s == "" {
		return 0, false
	}
	n := 0
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = add(mul(n, 10), int(c-'0'))
	}
	return n, true
}
