package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/pattern"
)

// An Exemption entry's matcher.name is, as in UDS Core, a JavaScript
// (ECMAScript) regular expression — UDS Core tests it with
// String.prototype.match, and its own Exemptions use lookaheads such as
// `falco-(?!falcosidekick-).*`, which Go's RE2 has not — so it is compiled
// with regexp2 in ECMAScript mode. Unlike UDS Core, it must match the whole
// name: `debug` exempts the Pod debug, not totally-not-debug-but-root. Every
// Exemption UDS Core ships ends in `.*` or `$` and matches as before; one
// written as a bare prefix (`^node-exporter-`) now matches less, never more.

// names compiles and matches the matchers' names: a tenant writes them
// when all namespaces' Exemptions count, so each is bounded (1024 bytes,
// 4096 instructions with counted repetitions expanded), compiled once per
// process, and one match gives up after 50ms; the matches of one request
// stop at its deadline or after a second (see package pattern).
var names = pattern.New(pattern.Options{Syntax: pattern.ECMAScript, Whole: true})

// nameExpr is the expression a matcher.name stands for, or why it is
// refused in UDS Core's words.
func nameExpr(expr string) (string, error) {
	if len(expr) >= 2 && strings.HasPrefix(expr, "/") && strings.HasSuffix(expr, "/") {
		return "", errors.New("remove the leading and trailing slashes: the name is the expression itself")
	}
	if expr == "" {
		expr = ".*" // the CRD: empty matches every pod
	}
	return expr, nil
}

// checkName reports why a matcher.name is refused: not an expression, or
// over names' budget.
func checkName(expr string) error {
	e, err := nameExpr(expr)
	if err != nil {
		return err
	}
	return names.Check(e)
}

// matchName reports whether a matcher.name matches the whole pod name,
// within the request's matcher: an error wrapping pattern.ErrStopped once
// the request's budget is spent, another when this name matches nothing
// (see checkName, or one match given up).
func matchName(m *pattern.Matcher, expr, pod string) (bool, error) {
	e, err := nameExpr(expr)
	if err != nil {
		return false, err
	}
	return m.Match(e, pod)
}

// invalidNames describes every entry of the Exemption whose matcher.name
// is refused: "spec.exemptions[2].matcher.name \"([a-z\": <error>".
func invalidNames(ex *unstructured.Unstructured) []string {
	var out []string
	entries, _, _ := unstructured.NestedSlice(ex.Object, "spec", "exemptions")
	for i, e := range entries {
		entry, _ := e.(map[string]any)
		expr, _, _ := unstructured.NestedString(entry, "matcher", "name")
		if err := checkName(expr); err != nil {
			out = append(out, fmt.Sprintf("spec.exemptions[%d].matcher.name %s: %v", i, clip(expr), err))
		}
	}
	return out
}

// clip quotes a tenant's text for a message, cut past 64 bytes.
func clip(s string) string {
	if len(s) > 64 {
		return fmt.Sprintf("%q…", s[:64])
	}
	return fmt.Sprintf("%q", s)
}

// validateExemption refuses an Exemption with a matcher.name that is not a
// valid expression. The watcher's audit runs it over the Exemptions that
// exist, so one stored while the module was down is reported as an
// AuditViolation Event on it (kubectl describe exemption) and a log line.
func validateExemption(_ context.Context, r *vigil.Request[*unstructured.Unstructured]) vigil.Verdict {
	bad := invalidNames(r.Object)
	if len(bad) == 0 {
		return admission.Allow()
	}
	if n := len(bad); n > 5 {
		bad = append(bad[:5], fmt.Sprintf("and %d more", n-5))
	}
	return admission.Deny(fmt.Sprintf(
		"Exemption %s/%s: %s. A matcher.name is a JavaScript regular expression, matched against the whole Pod name (e.g. \"^my-pod-.*\"): correct it",
		r.Namespace, r.Object.GetName(), strings.Join(bad, "; ")))
}

// scanPage bounds one page of the read of every namespace's Exemptions.
const scanPage = 2

// scanSlots bounds the reads of every namespace's Exemptions in the
// process: at most this many at a time, so that at most as many pages are
// in memory, whatever the number of privileged Pods admitted at once.
const scanSlots = 4

// scans are the reads of every namespace's Exemptions under way: a slot of
// all is taken by each, and one requester (a user in a namespace) holds at
// most one at a time, so that her Pods queue behind one another rather
// than fill the slots. A read ends by its request's deadline, its matches
// by their budget (names): no request holds a slot past its own deadline.
var scans = struct {
	all  chan struct{}
	mu   sync.Mutex
	mine map[string]*requester
}{all: make(chan struct{}, scanSlots), mine: map[string]*requester{}}

// requester is one requester's slot and how many of its requests want it.
type requester struct {
	slot chan struct{}
	refs int
}

// takeScan takes a slot for a read of every namespace's Exemptions on
// behalf of who, waiting no longer than ctx, and returns its release.
func takeScan(ctx context.Context, who string) (func(), error) {
	scans.mu.Lock()
	r := scans.mine[who]
	if r == nil {
		r = &requester{slot: make(chan struct{}, 1)}
		scans.mine[who] = r
	}
	r.refs++
	scans.mu.Unlock()
	drop := func() {
		scans.mu.Lock()
		if r.refs--; r.refs == 0 {
			delete(scans.mine, who)
		}
		scans.mu.Unlock()
	}
	select {
	case r.slot <- struct{}{}:
	case <-ctx.Done():
		drop()
		return nil, fmt.Errorf("waiting for another read of the Exemptions on behalf of %s: %w", who, context.Cause(ctx))
	}
	select {
	case scans.all <- struct{}{}:
	case <-ctx.Done():
		<-r.slot
		drop()
		return nil, fmt.Errorf("waiting for one of the %d reads of the Exemptions at a time: %w", scanSlots, context.Cause(ctx))
	}
	return func() { <-scans.all; <-r.slot; drop() }, nil
}

// matchAllNamespaces is matchExemption over the Exemptions of every
// namespace, read from the API server a page at a time (scanPage objects,
// scanSlots reads at a time in the process, one per requester) rather than
// cached: tenants write them, so their total is not bounded, while one page
// is. It stops at the first match, and at the request's deadline or when
// judge says its matches' budget is spent (an error); entries that do not
// compile are returned as invalidNames says.
func matchAllNamespaces(ctx context.Context, who string, judge func(page []*unstructured.Unstructured) (match string, invalid []string, err error)) (match string, invalid []string, err error) {
	c := vigil.ClientFrom(ctx)
	if c == nil {
		return "", nil, errors.New("no API client in this context")
	}
	release, err := takeScan(ctx, who)
	if err != nil {
		return "", nil, err
	}
	defer release()
	token := ""
	for {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(vigil.Kind(group, version, "ExemptionList").GroupVersionKind())
		if err := c.List(ctx, list, client.Limit(scanPage), client.Continue(token)); err != nil {
			if apierrors.IsResourceExpired(err) {
				token = "" // the continue token expired: start over, fresh
				continue
			}
			return "", nil, err
		}
		items := make([]*unstructured.Unstructured, len(list.Items))
		for i := range list.Items {
			items[i] = &list.Items[i]
		}
		m, bad, err := judge(items)
		invalid = append(invalid, bad...)
		if m != "" || err != nil {
			return m, invalid, err
		}
		if token = list.GetContinue(); token == "" {
			return "", invalid, nil
		}
	}
}
