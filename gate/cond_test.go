package gate

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	configMapGVK = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	crdGVK       = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}
)

func withUID(uid string) *unstructured.Unstructured {
	o := u("v1", "ConfigMap", "cfg", map[string]any{"metadata": map[string]any{"namespace": "ns", "uid": uid}})
	return o
}

func TestCreated(t *testing.T) {
	runChecks(t, []checkCase{
		{"nil", Created(), nil, false, "not found"},
		{"exists", Created(), withUID("a"), true, "exists"},
	})
	if got := Created().String(); got != "created" {
		t.Errorf("String() = %q, want created", got)
	}
}

func TestGone(t *testing.T) {
	terminating := withUID("a")
	terminating.Object["metadata"].(map[string]any)["deletionTimestamp"] = "2026-01-02T03:04:05Z"
	other := u("v1", "ConfigMap", "other", map[string]any{"metadata": map[string]any{"namespace": "ns", "uid": "z"}})

	// Each step feeds one object to the same condition, in order, because
	// what Gone answers depends on what it saw before.
	steps := []struct {
		name    string
		obj     *unstructured.Unstructured
		wantOK  bool
		wantWhy string
	}{
		{"nil before any sighting", nil, true, "not found"},
		{"first sighting records uid", withUID("a"), false, "still exists (uid a)"},
		{"same uid", withUID("a"), false, "still exists (uid a)"},
		{"same uid terminating", terminating, false, "still exists (uid a), terminating"},
		{"other name has its own uid", other, false, "still exists (uid z)"},
		{"nil after sighting", nil, true, "not found"},
		{"recreated with new uid", withUID("b"), true, "recreated: uid b replaced a"},
		{"first uid again is still the original", withUID("a"), false, "still exists (uid a)"},
	}
	d := Gone()
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			ok, why := d.Check(s.obj)
			if ok != s.wantOK || why != s.wantWhy {
				t.Errorf("Check() = (%v, %q), want (%v, %q)", ok, why, s.wantOK, s.wantWhy)
			}
		})
	}
	if got := d.String(); got != "deleted" {
		t.Errorf("String() = %q, want deleted", got)
	}
}

func TestGoneFreshIsIndependent(t *testing.T) {
	proto := Gone()
	st, ok := proto.(Stateful)
	if !ok {
		t.Fatal("Gone() does not implement Stateful")
	}
	w1, w2 := st.Fresh(), st.Fresh()
	if ok, _ := w1.Check(withUID("a")); ok {
		t.Fatal("first sighting in wait 1 was ok")
	}
	// Wait 2 has never seen uid a, so uid b is its first sighting, not a
	// recreation.
	if ok, why := w2.Check(withUID("b")); ok {
		t.Errorf("wait 2 saw uid b as recreated (%q): state leaked from wait 1", why)
	}
	if ok, _ := w1.Check(withUID("b")); !ok {
		t.Error("wait 1 did not see uid b as a recreation of uid a")
	}
	// The prototype itself was never used, so it holds no state either.
	if ok, _ := proto.Check(withUID("b")); ok {
		t.Error("prototype saw uid b as recreated: Fresh shares state with it")
	}
}

// Goroutines sharing one Gone must agree on each name's first UID: exactly
// one of them records it, every check with that UID says the object still
// exists, and every check with another UID says it was recreated from that
// one. A check-then-record that is not atomic lets two goroutines both take
// their UID as the first, and the answers then name two originals.
func TestGoneConcurrent(t *testing.T) {
	const goroutines, names, rounds = 8, 10, 100
	d := Gone()
	type answer struct {
		name, uid string
		ok        bool
		why       string
	}
	answers := make([][]answer, goroutines)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			uid := fmt.Sprint(i)
			for j := range rounds {
				name := fmt.Sprintf("cm-%d", j%names)
				ok, why := d.Check(u("v1", "ConfigMap", name, map[string]any{"metadata": map[string]any{"uid": uid}}))
				answers[i] = append(answers[i], answer{name, uid, ok, why})
			}
		}()
	}
	close(start)
	wg.Wait()

	// The first UID of each name is the one its "still exists" answers give.
	first := map[string]string{}
	for _, as := range answers {
		for _, a := range as {
			if a.ok {
				continue
			}
			if want := fmt.Sprintf("still exists (uid %s)", a.uid); a.why != want {
				t.Fatalf("%s with uid %s: Check() = (false, %q), want (false, %q)", a.name, a.uid, a.why, want)
			}
			if f, seen := first[a.name]; seen && f != a.uid {
				t.Fatalf("%s: uids %s and %s were both taken as the first sighting", a.name, f, a.uid)
			}
			first[a.name] = a.uid
		}
	}
	if len(first) != names {
		t.Fatalf("first uids recorded for %d names (%v), want %d", len(first), first, names)
	}
	for _, as := range answers {
		for _, a := range as {
			f := first[a.name]
			switch {
			case a.uid == f && a.ok:
				t.Fatalf("%s with its first uid %s: Check() = (true, %q), want still exists", a.name, a.uid, a.why)
			case a.uid != f && !a.ok:
				t.Fatalf("%s with uid %s after first uid %s: Check() = (false, %q), want recreated", a.name, a.uid, f, a.why)
			case a.uid != f:
				if want := fmt.Sprintf("recreated: uid %s replaced %s", a.uid, f); a.why != want {
					t.Fatalf("%s with uid %s: Check() = (true, %q), want (true, %q)", a.name, a.uid, a.why, want)
				}
			}
		}
	}
}

func TestAndOrNot(t *testing.T) {
	ready := map[string]any{"status": map[string]any{"conditions": conds("Ready", "True", "")}}
	notReady := map[string]any{"status": map[string]any{"conditions": conds("Ready", "False", "Waiting")}}
	rdy := Condition("Ready", "True")
	runChecks(t, []checkCase{
		{"and nil", And(Created(), rdy), nil, false, "not found"},
		{"and first fails", And(Created(), rdy), u("v1", "X", "x", notReady), false, "condition Ready=False (reason: Waiting), want True"},
		{"and all ok", And(Created(), rdy), u("v1", "X", "x", ready), true, "exists; condition Ready=True"},
		{"and empty", And(), u("v1", "X", "x", nil), true, ""},
		{"and nil child", And(Created(), nil), u("v1", "X", "x", nil), false, "nil condition"},
		{"or nil", Or(Created(), rdy), nil, false, "not found; not found"},
		{"or one ok", Or(rdy, Created()), u("v1", "X", "x", notReady), true, "exists"},
		{"or none ok", Or(rdy, Condition("Available", "True")), u("v1", "X", "x", notReady), false, "condition Ready=False (reason: Waiting), want True; condition Available not set"},
		{"or empty", Or(), u("v1", "X", "x", nil), false, "no alternatives"},
		{"not nil", Not(Created()), nil, true, "not found"},
		{"not exists", Not(Created()), u("v1", "X", "x", nil), false, "exists, want not (created)"},
		{"not ready", Not(rdy), u("v1", "X", "x", notReady), true, "condition Ready=False (reason: Waiting), want True"},
		{"not not", Not(Not(Created())), u("v1", "X", "x", nil), true, "exists, want not (created)"},
		{"not of nil", Not(nil), u("v1", "X", "x", nil), false, "nil condition"},
	})
}

func TestCombinatorStrings(t *testing.T) {
	for _, tc := range []struct {
		cond Cond
		want string
	}{
		{And(Created(), Condition("Ready", "True")), "created and condition Ready=True"},
		{Or(Created(), Gone()), "created or deleted"},
		{And(Created(), Or(Ready(), Not(Gone()))), "created and (ready or not (deleted))"},
		{Not(And(Created(), Ready())), "not (created and ready)"},
		{And(), "always"},
		{Or(), "never"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			if got := tc.cond.String(); got != tc.want {
				t.Errorf("String() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCombinatorValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cond Cond
		gvk  schema.GroupVersionKind
		// wantErr lists substrings the error must contain; nil means no error.
		wantErr []string
	}{
		{"and ok", And(Created(), Established()), crdGVK, nil},
		{"and child invalid", And(Created(), Established()), configMapGVK, []string{"gate.Established: expected a CustomResourceDefinition, got v1 ConfigMap"}},
		{"and collects all", And(CEL("object.x >"), JSONPath("{.a", "")), configMapGVK, []string{`gate.CEL("object.x >")`, `gate.JSONPath("{.a", "")`}},
		{"and nil child", And(Created(), nil), configMapGVK, []string{"gate.And: expected a condition at position 2, got nil"}},
		{"or child invalid", Or(Created(), Not(Established())), configMapGVK, []string{"gate.Established"}},
		{"or empty", Or(), configMapGVK, []string{"gate.Or: expected at least one condition, got none"}},
		{"not child invalid", Not(CEL("1")), configMapGVK, []string{`gate.CEL("1"): expected a CEL expression of type bool: got type int`}},
		{"not nil", Not(nil), configMapGVK, []string{"gate.Not: expected a condition, got nil"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, ok := tc.cond.(Validator)
			if !ok {
				t.Fatalf("%T does not implement Validator", tc.cond)
			}
			err := v.Validate(tc.gvk)
			if tc.wantErr == nil {
				if err != nil {
					t.Errorf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want an error containing %q", tc.wantErr)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestCombinatorFresh(t *testing.T) {
	for _, tc := range []struct {
		name string
		cond func(Cond) Cond
	}{
		{"and", func(c Cond) Cond { return And(Created(), c) }},
		{"or", func(c Cond) Cond { return Or(c, Condition("Never", "True")) }},
		{"not", func(c Cond) Cond { return Not(Not(c)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proto := tc.cond(Gone())
			st, ok := proto.(Stateful)
			if !ok {
				t.Fatalf("%T does not implement Stateful", proto)
			}
			w1, w2 := st.Fresh(), st.Fresh()
			w1.Check(withUID("a"))
			if ok, why := w1.Check(withUID("b")); !ok {
				t.Errorf("wait 1: recreation not seen through %s: %q", proto, why)
			}
			if ok, why := w2.Check(withUID("b")); ok {
				t.Errorf("wait 2: uid b seen as recreated (%q): Fresh did not reach the Gone child", why)
			}
		})
	}
}

// TestAndChecksEveryChild guards the reason And does not short-circuit: a
// Gone behind a failing condition must still record the first UID.
func TestAndChecksEveryChild(t *testing.T) {
	c := And(Condition("Gone", "True"), Gone()).(Stateful).Fresh()
	c.Check(withUID("a"))
	gone := withUID("b")
	gone.Object["status"] = map[string]any{"conditions": conds("Gone", "True", "")}
	if ok, why := c.Check(gone); !ok {
		t.Errorf("Check() = (false, %q), want the recreation to be seen", why)
	}
}

func TestPermanent(t *testing.T) {
	if Permanent(nil) != nil {
		t.Error("Permanent(nil) != nil")
	}
	if IsPermanent(nil) {
		t.Error("IsPermanent(nil) = true")
	}
	base := fmt.Errorf("read config: %w", fs.ErrNotExist)
	if IsPermanent(base) {
		t.Error("IsPermanent of an unmarked error = true")
	}
	p := Permanent(base)
	if !IsPermanent(p) {
		t.Error("IsPermanent(Permanent(err)) = false")
	}
	if !errors.Is(p, fs.ErrNotExist) {
		t.Error("errors.Is does not see through Permanent")
	}
	var pe *fs.PathError
	if errors.As(Permanent(&fs.PathError{Op: "open", Path: "/x", Err: fs.ErrNotExist}), &pe) == false || pe.Path != "/x" {
		t.Error("errors.As does not see through Permanent")
	}
	if p.Error() != base.Error() {
		t.Errorf("Error() = %q, want the wrapped message %q", p.Error(), base.Error())
	}
	// The mark survives further wrapping by callers.
	if !IsPermanent(fmt.Errorf("gate x: %w", p)) {
		t.Error("IsPermanent lost the mark through fmt.Errorf %w")
	}
}
