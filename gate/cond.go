package gate

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// Cond decides whether the object a gate watches is as wanted.
type Cond interface {
	// Check reports whether obj satisfies the condition. obj is nil when no
	// such object exists (an untyped nil pointer). When not satisfied, why
	// says briefly what was seen, for progress logs, e.g. "not found",
	// "status.phase=Pending, want Ready", "condition Ready=False (reason:
	// Waiting), want True", "stale status: observedGeneration 1 < generation
	// 2". When satisfied, why may describe the match or be "".
	Check(obj *unstructured.Unstructured) (ok bool, why string)
	// String says what is waited for, e.g. "created", "established",
	// "condition Ready=True", "jsonpath {.status.phase}=Ready",
	// "cel object.spec.x > 1".
	String() string
}

// Validator is implemented by conditions that can be wrong in a definition:
// bad CEL or JSONPath, or a condition that cannot apply to the gate's kind
// (Established on a ConfigMap). Validate is called once at definition time.
type Validator interface {
	Validate(gvk schema.GroupVersionKind) error
}

// Stateful is implemented by conditions that keep state while one wait runs
// (Gone remembers UIDs). The engine calls Fresh once per wait and uses the
// returned Cond for that wait only.
type Stateful interface {
	Fresh() Cond
}

// notFound is the why of every condition that needs an object and has none,
// so progress logs read the same whichever condition is waiting.
const notFound = "not found"

var (
	_ Cond = created{}

	_ Cond     = (*deleted)(nil)
	_ Stateful = (*deleted)(nil)

	_ Cond      = allOf{}
	_ Validator = allOf{}
	_ Stateful  = allOf{}

	_ Cond      = anyOf{}
	_ Validator = anyOf{}
	_ Stateful  = anyOf{}

	_ Cond      = negation{}
	_ Validator = negation{}
	_ Stateful  = negation{}
)

// Created is satisfied as soon as the object exists.
func Created() Cond { return created{} }

type created struct{}

func (created) Check(obj *unstructured.Unstructured) (bool, string) {
	if obj == nil {
		return false, notFound
	}
	return true, "exists"
}

func (created) String() string { return "created" }

// Gone is satisfied when the object is gone. It compares UIDs rather than
// only looking for absence, because a wait can miss the gap between a delete
// and a recreate: an object seen with a UID other than the one first seen
// under the same namespace/name is a new object, so the original is deleted.
// The first sighting of an object only records its UID.
//
// Gone is [Stateful]: the engine takes a Fresh copy per wait, so UIDs seen
// in one wait never leak into another. It is safe for concurrent use.
func Gone() Cond { return &deleted{} }

type deleted struct {
	mu   sync.Mutex
	uids map[types.NamespacedName]types.UID
}

func (d *deleted) Check(obj *unstructured.Unstructured) (bool, string) {
	if obj == nil {
		return true, notFound
	}
	key := types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}
	uid := obj.GetUID()
	d.mu.Lock()
	first, seen := d.uids[key]
	if !seen {
		if d.uids == nil {
			d.uids = map[types.NamespacedName]types.UID{}
		}
		d.uids[key] = uid
	}
	d.mu.Unlock()
	if seen && first != uid {
		return true, fmt.Sprintf("recreated: uid %s replaced %s", uid, first)
	}
	if obj.GetDeletionTimestamp() != nil {
		return false, fmt.Sprintf("still exists (uid %s), terminating", uid)
	}
	return false, fmt.Sprintf("still exists (uid %s)", uid)
}

func (d *deleted) String() string { return "deleted" }

func (d *deleted) Fresh() Cond { return &deleted{} }

// And is satisfied when every condition is. Its why, when not satisfied, is
// that of the first condition that is not.
func And(cs ...Cond) Cond { return allOf(cs) }

type allOf []Cond

func (a allOf) Check(obj *unstructured.Unstructured) (bool, string) {
	// Every child is checked, even after one fails, so that stateful
	// children such as Gone see every version of the object.
	ok, failed, whys := true, "", []string{}
	for _, c := range a {
		cok, why := check(c, obj)
		switch {
		case !cok && ok:
			ok, failed = false, why
		case cok && why != "":
			whys = append(whys, why)
		}
	}
	if !ok {
		return false, failed
	}
	return true, strings.Join(whys, "; ")
}

func (a allOf) String() string {
	if len(a) == 0 {
		return "always"
	}
	return join(a, " and ")
}

func (a allOf) Validate(gvk schema.GroupVersionKind) error {
	return validateAll("gate.And", a, gvk)
}

func (a allOf) Fresh() Cond { return allOf(freshAll(a)) }

// Or is satisfied when at least one condition is. When none is, its why lists
// each condition's why, so the log shows every alternative still missing.
func Or(cs ...Cond) Cond { return anyOf(cs) }

type anyOf []Cond

func (o anyOf) Check(obj *unstructured.Unstructured) (bool, string) {
	if len(o) == 0 {
		return false, "no alternatives"
	}
	// As in And, no short cut: stateful children must see every object.
	ok, matched, whys := false, "", make([]string, 0, len(o))
	for _, c := range o {
		cok, why := check(c, obj)
		if cok && !ok {
			ok, matched = true, why
		}
		if why == "" {
			why = "not " + describe(c)
		}
		whys = append(whys, why)
	}
	if ok {
		return true, matched
	}
	return false, strings.Join(whys, "; ")
}

func (o anyOf) String() string {
	if len(o) == 0 {
		return "never"
	}
	return join(o, " or ")
}

func (o anyOf) Validate(gvk schema.GroupVersionKind) error {
	if len(o) == 0 {
		return errors.New("gate.Or: expected at least one condition, got none: an empty Or can never be satisfied; pass the alternatives to wait for")
	}
	return validateAll("gate.Or", o, gvk)
}

func (o anyOf) Fresh() Cond { return anyOf(freshAll(o)) }

// Not is satisfied when c is not. Not(Created()) waits for absence without
// the UID bookkeeping of Gone, so it does not notice a recreated object.
func Not(c Cond) Cond { return negation{c} }

type negation struct{ c Cond }

func (n negation) Check(obj *unstructured.Unstructured) (bool, string) {
	if n.c == nil {
		return false, "nil condition"
	}
	ok, why := n.c.Check(obj)
	if !ok {
		return true, why
	}
	if why == "" {
		why = n.c.String()
	}
	return false, why + ", want " + n.String()
}

func (n negation) String() string { return "not (" + describe(n.c) + ")" }

func (n negation) Validate(gvk schema.GroupVersionKind) error {
	if n.c == nil {
		return errors.New("gate.Not: expected a condition, got nil: pass one such as gate.Created()")
	}
	if v, ok := n.c.(Validator); ok {
		return v.Validate(gvk)
	}
	return nil
}

func (n negation) Fresh() Cond {
	if s, ok := n.c.(Stateful); ok {
		return negation{s.Fresh()}
	}
	return n
}

// check guards against nil children, which a definition can contain when a
// condition is built conditionally; Validate reports them, Check must not panic.
func check(c Cond, obj *unstructured.Unstructured) (bool, string) {
	if c == nil {
		return false, "nil condition"
	}
	return c.Check(obj)
}

func describe(c Cond) string {
	if c == nil {
		return "<nil>"
	}
	return c.String()
}

// join parenthesises nested combinations so that "a and (b or c)" keeps its
// meaning when printed.
func join(cs []Cond, sep string) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = describe(c)
		switch c.(type) {
		case allOf, anyOf:
			parts[i] = "(" + parts[i] + ")"
		}
	}
	return strings.Join(parts, sep)
}

func validateAll(fn string, cs []Cond, gvk schema.GroupVersionKind) error {
	var errs []error
	for i, c := range cs {
		if c == nil {
			errs = append(errs, fmt.Errorf("%s: expected a condition at position %d, got nil: remove it or pass one such as gate.Created()", fn, i+1))
			continue
		}
		if v, ok := c.(Validator); ok {
			if err := v.Validate(gvk); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func freshAll(cs []Cond) []Cond {
	out := make([]Cond, len(cs))
	for i, c := range cs {
		if s, ok := c.(Stateful); ok {
			out[i] = s.Fresh()
		} else {
			out[i] = c
		}
	}
	return out
}

// Permanent marks an error from a gate callback as not worth retrying: the
// phase fails at once. A nil error stays nil, and errors.Is and errors.As
// still see err through the mark.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// IsPermanent reports whether err, or any error it wraps, was marked with
// [Permanent].
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

type permanentError struct{ err error }

// Error leaves the message as it is: the mark changes what the engine does,
// not what the operator reads.
func (p *permanentError) Error() string { return p.err.Error() }

func (p *permanentError) Unwrap() error { return p.err }
