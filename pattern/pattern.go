package pattern

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"sync"
	"time"

	"github.com/dlclark/regexp2"
)

func init() {
	// regexp2 checks a match's timeout against a clock it advances every
	// 100ms; every 10ms, a 50ms timeout ends the match within about 70ms.
	regexp2.SetTimeoutCheckPeriod(10 * time.Millisecond)
}

// Syntax is the regular expression language of a Set.
type Syntax int

const (
	// RE2 is Go's regexp syntax: matching takes time linear in the text,
	// and the program is bounded by Options.MaxSize.
	RE2 Syntax = iota
	// ECMAScript is JavaScript's syntax, lookaheads included, as
	// github.com/dlclark/regexp2 compiles it: it backtracks, so one match
	// is bounded by Options.MatchTimeout.
	ECMAScript
)

// String names the syntax in messages.
func (s Syntax) String() string {
	if s == ECMAScript {
		return "ECMAScript (JavaScript)"
	}
	return "RE2 (Go)"
}

// Options are a Set's syntax and budget. A zero field takes its default.
type Options struct {
	// Syntax is the expressions' language; RE2 by default.
	Syntax Syntax
	// Whole makes an expression match the whole text, as if written
	// ^(?:expr)$; otherwise it matches anywhere in it.
	Whole bool
	// MaxLength bounds an expression's length in bytes: 1024 by default.
	MaxLength int
	// MaxSize bounds an expression's program: counted repetitions
	// expanded (x{0,100} counts as 100 x's), and for RE2 the instructions
	// syntax.Compile makes of it. 4096 by default.
	MaxSize int
	// MatchTimeout bounds one ECMAScript match: 50ms by default.
	MatchTimeout time.Duration
	// Work bounds all the matches of one Matcher, compiles included: 1s by
	// default.
	Work time.Duration
	// MaxCached bounds the total size of the compiled patterns a Set keeps
	// (each weighs its program's size plus its length): 1<<17 by default.
	MaxCached int
}

// ErrStopped is wrapped by a Matcher's error once its request's context is
// done or its Work budget is spent: a loop over entries stops there.
var ErrStopped = errors.New("matching stopped")

// A Set compiles the expressions of one syntax under one budget, and keeps
// what it compiled (and what it refused) for the next request. It is safe
// for concurrent use; make one per kind of expression, at package level or
// when the module is declared.
type Set struct {
	o Options

	mu     sync.Mutex
	byExpr map[string]*list.Element // of *compiled
	lru    *list.List               // most recently used first
	weight int
}

// compiled is an expression compiled, or the reason it was refused.
type compiled struct {
	expr   string
	re2    *regexp.Regexp
	ecma   *regexp2.Regexp
	err    error
	weight int
}

// New returns a Set with the options, defaults filled in.
func New(o Options) *Set {
	if o.MaxLength <= 0 {
		o.MaxLength = 1024
	}
	if o.MaxSize <= 0 {
		o.MaxSize = 4096
	}
	if o.MatchTimeout <= 0 {
		o.MatchTimeout = 50 * time.Millisecond
	}
	if o.Work <= 0 {
		o.Work = time.Second
	}
	if o.MaxCached <= 0 {
		o.MaxCached = 1 << 17
	}
	return &Set{o: o, byExpr: map[string]*list.Element{}, lru: list.New()}
}

// Check compiles the expression, or keeps what an earlier call compiled,
// and returns why it is refused: it does not parse, or it is over the
// Set's budget. A validation refuses the object that carries it with the
// error.
func (s *Set) Check(expr string) error {
	return s.compile(expr).err
}

// compile is the expression compiled, from the cache or compiled now and
// kept.
func (s *Set) compile(expr string) *compiled {
	s.mu.Lock()
	if el, ok := s.byExpr[expr]; ok {
		s.lru.MoveToFront(el)
		s.mu.Unlock()
		return el.Value.(*compiled)
	}
	s.mu.Unlock()
	c := s.build(expr)
	s.mu.Lock()
	defer s.mu.Unlock()
	if el, ok := s.byExpr[expr]; ok { // compiled meanwhile by another request
		s.lru.MoveToFront(el)
		return el.Value.(*compiled)
	}
	if c.weight > s.o.MaxCached {
		return c
	}
	s.byExpr[expr] = s.lru.PushFront(c)
	s.weight += c.weight
	for s.weight > s.o.MaxCached {
		old := s.lru.Remove(s.lru.Back()).(*compiled)
		delete(s.byExpr, old.expr)
		s.weight -= old.weight
	}
	return c
}

// build compiles the expression within the budget, checking its length
// and its program's size before anything of its size is allocated.
func (s *Set) build(expr string) *compiled {
	c := &compiled{expr: expr, weight: len(expr) + 16}
	if len(expr) > s.o.MaxLength {
		c.err = fmt.Errorf("expression %s is %d bytes long, over the budget of %d: write a shorter one, e.g. a prefix followed by .*", quote(expr), len(expr), s.o.MaxLength)
		return c
	}
	whole := expr
	if s.o.Whole {
		whole = "^(?:" + expr + ")$"
	}
	switch s.o.Syntax {
	case ECMAScript:
		// regexp2 keeps a counted repetition as a loop, but matching
		// repeats it: its expansion is bounded as RE2's is.
		if n := ecmaSize(expr); n > s.o.MaxSize {
			c.err = tooLarge(expr, n, s.o.MaxSize)
			return c
		}
		// Parsed alone first: a trailing \ would otherwise escape the ).
		if _, err := regexp2.Compile(expr, regexp2.ECMAScript); err != nil {
			c.err = invalid(expr, s.o.Syntax, err)
			return c
		}
		re, err := regexp2.Compile(whole, regexp2.ECMAScript)
		if err != nil {
			c.err = invalid(expr, s.o.Syntax, err)
			return c
		}
		re.MatchTimeout = s.o.MatchTimeout
		c.ecma = re
	default:
		parsed, err := syntax.Parse(expr, syntax.Perl)
		if err != nil {
			c.err = invalid(expr, s.o.Syntax, err)
			return c
		}
		// Simplify copies each counted repetition: bound the copies first.
		if n := re2Size(parsed); n > s.o.MaxSize {
			c.err = tooLarge(expr, n, s.o.MaxSize)
			return c
		}
		prog, err := syntax.Compile(parsed.Simplify())
		if err != nil {
			c.err = invalid(expr, s.o.Syntax, err)
			return c
		}
		if n := len(prog.Inst); n > s.o.MaxSize {
			c.err = tooLarge(expr, n, s.o.MaxSize)
			return c
		}
		re, err := regexp.Compile(whole)
		if err != nil {
			c.err = invalid(expr, s.o.Syntax, err)
			return c
		}
		c.re2 = re
		c.weight += len(prog.Inst)
	}
	return c
}

// A Matcher matches expressions of its Set for one request: it stops at
// the request context's deadline and once its matches have taken the Set's
// Work budget. It is not safe for concurrent use: make one per request.
type Matcher struct {
	s       *Set
	ctx     context.Context
	spent   time.Duration
	matches int
}

// Matcher returns a Matcher bounded by ctx and the Set's Work budget.
func (s *Set) Matcher(ctx context.Context) *Matcher {
	return &Matcher{s: s, ctx: ctx}
}

// Match reports whether the expression matches text. The error wraps
// ErrStopped when the request's context is done or its budget spent —
// stop there — and otherwise says why this expression matches nothing: it
// is refused (as Check says), or one match took over the MatchTimeout.
func (m *Matcher) Match(expr, text string) (bool, error) {
	if err := m.ctx.Err(); err != nil {
		return false, fmt.Errorf("%w after %d matches: the request's context is done (%v)", ErrStopped, m.matches, context.Cause(m.ctx))
	}
	if m.spent >= m.s.o.Work {
		return false, fmt.Errorf("%w after %d matches: they took %s, over the budget of %s for one request; remove the expressions that backtrack, such as (a+)+",
			ErrStopped, m.matches, m.spent.Round(time.Millisecond), m.s.o.Work)
	}
	began := time.Now()
	defer func() { m.spent += time.Since(began) }()
	m.matches++
	c := m.s.compile(expr)
	if c.err != nil {
		return false, c.err
	}
	if c.re2 != nil {
		return c.re2.MatchString(text), nil
	}
	ok, err := c.ecma.MatchString(text)
	if err != nil {
		return false, fmt.Errorf("expression %s took over %s to match %s and was given up: it backtracks; write it without nested repetitions such as (a+)+", quote(expr), m.s.o.MatchTimeout, quote(text))
	}
	return ok, nil
}

// invalid is the error of an expression that does not parse.
func invalid(expr string, syn Syntax, err error) error {
	return fmt.Errorf("expression %s is not a valid %s regular expression: %v: correct it", quote(expr), syn, err)
}

// tooLarge is the error of an expression whose program is over the budget.
func tooLarge(expr string, n, limit int) error {
	return fmt.Errorf("expression %s compiles to %d instructions, counted repetitions such as {0,1000} copied that many times, over the budget of %d: use fewer or smaller counted repetitions (a name is at most 253 characters), or * and +",
		quote(expr), n, limit)
}

// quote quotes an expression or a text for a message, its middle elided
// past 80 bytes, so that a long one does not fill the message.
func quote(s string) string {
	const keep = 80
	if len(s) <= keep {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q…%q (%d bytes)", s[:keep/2], s[len(s)-keep/2:], len(s))
}
