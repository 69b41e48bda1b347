package pattern

import (
	"context"
	"errors"
	"fmt"
	"regexp/syntax"
	"runtime"
	"strings"
	"testing"
	"time"
)

// allocated is the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// The red team's name: 13 KB that RE2 accepts and compiles to hundreds of
// MB. Each syntax refuses it, and anything shorter that expands as much,
// before allocating its program, naming the expression and the budget.
func TestCountedRepetitionsAreBoundedBeforeCompiling(t *testing.T) {
	huge := strings.Repeat("[a-z]{0,1000}", 1000)
	short := strings.Repeat("[a-z]{0,1000}", 5)             // 65 bytes, 5000 copies
	nested := "(a{0,30}b{0,30}c{0,30}d{0,30}e{0,30}){0,30}" // 4650 copies
	for _, syn := range []Syntax{RE2, ECMAScript} {
		for _, c := range []struct {
			expr, want string
		}{
			{huge, "13000 bytes long, over the budget of 1024"},
			{short, "over the budget of 4096"},
			{nested, "over the budget of 4096"},
		} {
			// A Set of its own, so that nothing is kept between the cases.
			s := New(Options{Syntax: syn, MaxLength: 1 << 20})
			if c.expr == huge {
				s = New(Options{Syntax: syn})
			}
			var err error
			bytes := allocated(func() { err = s.Check(c.expr) })
			t.Logf("%s: %d bytes of expression refused with %d bytes allocated: %v", syn, len(c.expr), bytes, err)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "expression ") {
				t.Errorf("%s, %.40q: %v, want it refused saying %q", syn, c.expr, err, c.want)
			}
			if bytes > 4<<20 {
				t.Errorf("%s, %.40q: refusing it allocated %d MB: it was compiled", syn, c.expr, bytes>>20)
			}
		}
		// The whole 13 KB, even when its length is allowed, is refused
		// for what it expands to, not compiled.
		s := New(Options{Syntax: syn, MaxLength: 1 << 20})
		var err error
		if bytes := allocated(func() { err = s.Check(huge) }); bytes > 4<<20 || err == nil || !strings.Contains(err.Error(), "compiles to 100100") {
			t.Errorf("%s: the 13 KB expression, its length allowed: %v with %d MB allocated, want it refused for its size before compiling", syn, err, bytes>>20)
		}
	}
}

// Expressions as UDS Core writes them compile and match: anywhere in the
// text, or the whole text with Whole; lookaheads in ECMAScript only.
func TestMatch(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		o          Options
		expr, text string
		want       bool
	}{
		{Options{}, "^node-exporter-.*", "node-exporter-x7k2p", true},
		{Options{}, "debug", "totally-not-debug-but-root", true},
		{Options{Whole: true}, "debug", "totally-not-debug-but-root", false},
		{Options{Whole: true}, "a|debug", "debug", true},
		{Options{}, "[a-z]{0,200}-[0-9]+", "web-12", true},
		{Options{Syntax: ECMAScript, Whole: true}, "falco-(?!falcosidekick-).*", "falco-x8k2p", true},
		{Options{Syntax: ECMAScript, Whole: true}, "falco-(?!falcosidekick-).*", "falco-falcosidekick-ui-1", false},
		{Options{Syntax: ECMAScript, Whole: true}, "^keycloak-[0-9]+$", "keycloak-0", true},
		{Options{Syntax: ECMAScript}, "debug", "not-debug", true},
		{Options{Syntax: ECMAScript, Whole: true}, "debug", "not-debug", false},
	} {
		got, err := New(c.o).Matcher(ctx).Match(c.expr, c.text)
		if err != nil || got != c.want {
			t.Errorf("%s (whole %v): %q matches %q: %v (%v), want %v", c.o.Syntax, c.o.Whole, c.expr, c.text, got, err, c.want)
		}
	}
	for _, c := range []struct {
		syn  Syntax
		expr string
	}{
		{RE2, "([a-z"}, {RE2, "falco-(?!x)"}, {ECMAScript, "([a-z"}, {ECMAScript, `abc\`}, {ECMAScript, "*x"},
	} {
		err := New(Options{Syntax: c.syn, Whole: true}).Check(c.expr)
		if err == nil || !strings.Contains(err.Error(), "is not a valid") || !strings.Contains(err.Error(), fmt.Sprintf("%q", c.expr)) {
			t.Errorf("%s: %q: %v, want it refused as invalid, naming it", c.syn, c.expr, err)
		}
	}
}

// An expression is compiled once however often it is matched, and the
// cache holds no more than its budget, dropping the least recently used.
func TestCompiledOnceAndCacheBounded(t *testing.T) {
	s := New(Options{MaxCached: 2000})
	if a, b := s.compile("^web-.*"), s.compile("^web-.*"); a != b {
		t.Errorf("^web-.* was compiled twice")
	}
	for i := range 500 {
		if err := s.Check(fmt.Sprintf("^app-%d-[a-z]+$", i)); err != nil {
			t.Fatal(err)
		}
		s.compile("^keep$") // used all along: kept
	}
	s.mu.Lock()
	weight, n := s.weight, len(s.byExpr)
	_, kept := s.byExpr["^keep$"]
	_, first := s.byExpr["^app-0-[a-z]+$"]
	s.mu.Unlock()
	t.Logf("500 expressions compiled; %d kept, weighing %d", n, weight)
	if weight > 2000 || n >= 500 {
		t.Errorf("the cache holds %d expressions weighing %d, over its budget of 2000", n, weight)
	}
	if !kept || first {
		t.Errorf("the expression used all along kept: %v; the first one, unused since, kept: %v; want it the other way round", kept, first)
	}
}

// A Matcher stops at its request's deadline and once its matches took the
// Work budget: the red team's 400 entries of (a+)+b against a name of 40
// a's stop after a few, the error saying so, rather than taking a minute.
func TestMatcherStopsAtItsBudget(t *testing.T) {
	name := strings.Repeat("a", 40)
	s := New(Options{Syntax: ECMAScript, Whole: true, MatchTimeout: 20 * time.Millisecond, Work: 200 * time.Millisecond})
	m := s.Matcher(context.Background())
	tried := 0
	var err error
	for range 400 {
		tried++
		if _, err = m.Match("(a+)+b", name); errors.Is(err, ErrStopped) {
			break
		}
		if err == nil || !strings.Contains(err.Error(), "was given up: it backtracks") {
			t.Fatalf("match %d of (a+)+b against %d a's: %v, want it given up", tried, len(name), err)
		}
	}
	t.Logf("stopped after %d of 400 matches: %v", tried, err)
	if !errors.Is(err, ErrStopped) || !strings.Contains(err.Error(), "over the budget of 200ms") || tried == 400 {
		t.Errorf("after %d matches: %v, want the matcher stopped by its budget", tried, err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	m = s.Matcher(ctx)
	if ok, err := m.Match("^a+$", name); !ok || err != nil {
		t.Fatalf("^a+$ against %d a's: %v, %v", len(name), ok, err)
	}
	cancel()
	if _, err := m.Match("^a+$", name); !errors.Is(err, ErrStopped) || !strings.Contains(err.Error(), "context is done") {
		t.Errorf("a match once the request's context is done: %v, want it stopped", err)
	}
}

// mustParse parses an RE2 expression as regexp.Compile does.
func mustParse(t *testing.T, expr string) *syntax.Regexp {
	t.Helper()
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		t.Fatal(err)
	}
	return re
}

// The size bound each syntax computes for an expression.
func TestSize(t *testing.T) {
	for _, c := range []struct {
		expr      string
		atLeast   int
		atMost    int
		ecmaExact int
	}{
		{"abc", 3, 4, 3},
		{"a{10}", 10, 12, 11},
		{"(ab){3}", 6, 12, 10},
		{"[a-z]{0,1000}", 1000, 1002, 1001},
		{"((a{0,10}){0,10}){0,10}", 1000, 1300, 1221},
		{`\d{1000}x`, 1000, 1003, 1002},
	} {
		parsed := mustParse(t, c.expr)
		if n := re2Size(parsed); n < c.atLeast || n > c.atMost {
			t.Errorf("re2Size(%q) = %d, want %d to %d", c.expr, n, c.atLeast, c.atMost)
		}
		if n := ecmaSize(c.expr); n < c.atLeast || n > c.atMost || c.ecmaExact != 0 && n != c.ecmaExact {
			t.Errorf("ecmaSize(%q) = %d, want %d to %d (%d)", c.expr, n, c.atLeast, c.atMost, c.ecmaExact)
		}
	}
	// Not counted repetitions, in ECMAScript: literal braces, and braces
	// inside a class.
	for expr, want := range map[string]int{"a{": 2, "a{x}": 4, "[{]{3}": 4, "(?<n>a){2}": 5, "a{99999999999999999999999}": most} {
		if n := ecmaSize(expr); n != want {
			t.Errorf("ecmaSize(%q) = %d, want %d", expr, n, want)
		}
	}
}

// A match of a kept expression, and a refusal of the red team's 13 KB one,
// per syntax.
func BenchmarkPattern(b *testing.B) {
	huge := strings.Repeat("[a-z]{0,1000}", 1000)
	for _, syn := range []Syntax{RE2, ECMAScript} {
		s := New(Options{Syntax: syn, Whole: true, MaxLength: 1 << 20})
		b.Run(syn.String()+"/match", func(b *testing.B) {
			m := s.Matcher(b.Context())
			for b.Loop() {
				m.spent = 0
				if ok, err := m.Match("^node-exporter-[a-z0-9]+$", "node-exporter-x7k2p"); !ok || err != nil {
					b.Fatal(ok, err)
				}
			}
		})
		b.Run(syn.String()+"/refuse-13KB", func(b *testing.B) {
			for b.Loop() {
				s := New(Options{Syntax: syn, MaxLength: 1 << 20})
				if s.Check(huge) == nil {
					b.Fatal("accepted")
				}
			}
		})
	}
}
