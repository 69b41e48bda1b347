package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dlclark/regexp2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/admission"
)

// An Exemption entry's matcher.name is, as in UDS Core, a JavaScript
// (ECMAScript) regular expression — UDS Core tests it with
// String.prototype.match, and its own Exemptions use lookaheads such as
// `falco-(?!falcosidekick-).*`, which Go's RE2 has not — so it is compiled
// with regexp2 in ECMAScript mode. Unlike UDS Core, it must match the whole
// name: `debug` exempts the Pod debug, not totally-not-debug-but-root. Every
// Exemption UDS Core ships ends in `.*` or `$` and matches as before; one
// written as a bare prefix (`^node-exporter-`) now matches less, never more.

// matchTimeout bounds one match: regexp2 backtracks, and when all namespaces'
// Exemptions count, a tenant writes the expressions.
const matchTimeout = 50 * time.Millisecond

// compileName compiles a matcher.name, anchored; the error says what is
// wrong with it in UDS Core's words.
func compileName(expr string) (*regexp2.Regexp, error) {
	if len(expr) >= 2 && strings.HasPrefix(expr, "/") && strings.HasSuffix(expr, "/") {
		return nil, errors.New("remove the leading and trailing slashes: the name is the expression itself")
	}
	if expr == "" {
		expr = ".*" // the CRD: empty matches every pod
	}
	if _, err := regexp2.Compile(expr, regexp2.ECMAScript); err != nil {
		return nil, err
	}
	re, err := regexp2.Compile("^(?:"+expr+")$", regexp2.ECMAScript)
	if err != nil {
		return nil, err
	}
	re.MatchTimeout = matchTimeout
	return re, nil
}

// invalidNames describes every entry of the Exemption whose matcher.name
// does not compile: "spec.exemptions[2].matcher.name \"([a-z\": <error>".
func invalidNames(ex *unstructured.Unstructured) []string {
	var out []string
	entries, _, _ := unstructured.NestedSlice(ex.Object, "spec", "exemptions")
	for i, e := range entries {
		entry, _ := e.(map[string]any)
		expr, _, _ := unstructured.NestedString(entry, "matcher", "name")
		if _, err := compileName(expr); err != nil {
			out = append(out, fmt.Sprintf("spec.exemptions[%d].matcher.name %q: %v", i, expr, err))
		}
	}
	return out
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
	return admission.Deny(fmt.Sprintf(
		"Exemption %s/%s: %s. A matcher.name is a JavaScript regular expression, matched against the whole Pod name (e.g. \"^my-pod-.*\"): correct it",
		r.Namespace, r.Object.GetName(), strings.Join(bad, "; ")))
}

// scanPage bounds one page of the read of every namespace's Exemptions.
const scanPage = 2

// scan is taken by each read of every namespace's Exemptions, so that at
// most one page of them is in memory at a time, whatever the number of
// privileged Pods admitted at once.
var scan = make(chan struct{}, 1)

// matchAllNamespaces is matchExemption over the Exemptions of every
// namespace, read from the API server a page at a time (scanPage objects,
// one read at a time in the process) rather than cached: tenants write them,
// so their total is not bounded, while one page is. It stops at the first
// match; entries that do not compile are returned as invalidNames says.
func matchAllNamespaces(ctx context.Context, judge func(page []*unstructured.Unstructured) (match string, invalid []string)) (match string, invalid []string, err error) {
	c := vigil.ClientFrom(ctx)
	if c == nil {
		return "", nil, errors.New("no API client in this context")
	}
	select {
	case scan <- struct{}{}:
		defer func() { <-scan }()
	case <-ctx.Done():
		return "", nil, fmt.Errorf("waiting for another read of the Exemptions: %w", context.Cause(ctx))
	}
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
		m, bad := judge(items)
		invalid = append(invalid, bad...)
		if m != "" {
			return m, invalid, nil
		}
		if token = list.GetContinue(); token == "" {
			return "", invalid, nil
		}
	}
}
