package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/pattern"
)

// Exemption is UDS Core's Exemption (uds.dev/v1alpha1), as far as the
// policies read it.
type Exemption struct {
	Spec struct {
		Exemptions []ExemptionEntry `json:"exemptions"`
	} `json:"spec"`
}

// ExemptionEntry exempts the objects its matcher names from its policies.
type ExemptionEntry struct {
	Title       string   `json:"title,omitempty"`
	Description string   `json:"description,omitempty"`
	Policies    []Policy `json:"policies"`
	Matcher     Matcher  `json:"matcher"`
}

// Matcher names objects: a namespace, a name expression (a regular
// expression, matched anywhere in the name as JavaScript's String.match
// does) and a kind, pod (the default) or service.
//
// Whoever may write an Exemption writes the expression, so it is compiled
// and matched through names, under its budget: at most 1024 bytes and 4096
// instructions with counted repetitions expanded (`[a-z]{0,1000}` counts a
// thousand), each distinct expression compiled once per process, and one
// request's matches stopped at its deadline or after a second of work.
type Matcher struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Kind      string `json:"kind,omitempty"`
}

// names compiles and matches the matchers' names (see Matcher).
var names = pattern.New(pattern.Options{Syntax: pattern.RE2})

// exemptions are the cluster's Exemptions, as the policies read them.
type exemptions struct {
	lister *vigil.Lister[*unstructured.Unstructured]
	cfg    *config
	// trust drops the Exemptions whose namespace no trusted identity
	// created (trust.go).
	trust *trust
	// parsed holds each Exemption's entries by UID:
	// an Exemption is parsed once per resourceVersion, not once per policy
	// and request. It is emptied once it holds maxParsed, so that deleted
	// Exemptions do not stay in it forever.
	parsed  sync.Map // UID → parsedExemption
	nParsed atomic.Int64
}

// maxParsed bounds the parsed Exemptions kept.
const maxParsed = 4096

// parsedExemption is one version of an Exemption, parsed.
type parsedExemption struct {
	resourceVersion string
	entries         []ExemptionEntry
}

// declareExemptions declares the Exemptions' cache. UDS Core's own store
// watches every namespace, and so does this one; which namespaces count is
// decided per request (see exempt).
func declareExemptions(m *vigil.Module, cfg *config) *exemptions {
	return &exemptions{lister: vigil.NewLister(m, vigil.Kind(group, version, "Exemption")), cfg: cfg}
}

// entries are the Exemption's entries, parsed once per resourceVersion;
// their names are compiled only when a request matches them (names keeps
// them compiled).
func (e *exemptions) entries(u *unstructured.Unstructured) []ExemptionEntry {
	if v, ok := e.parsed.Load(u.GetUID()); ok && v.(parsedExemption).resourceVersion == u.GetResourceVersion() {
		return v.(parsedExemption).entries
	}
	var ex Exemption
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ex); err != nil {
		return nil
	}
	out := ex.Spec.Exemptions
	if e.nParsed.Add(1) > maxParsed {
		e.parsed.Clear()
		e.nParsed.Store(1)
	}
	e.parsed.Store(u.GetUID(), parsedExemption{resourceVersion: u.GetResourceVersion(), entries: out})
	return out
}

// exempt reports whether an Exemption exempts the object name of namespace
// from policy (see exemptFrom).
func (e *exemptions) exempt(ctx context.Context, policy Policy, namespace, name string) bool {
	if e.exemptFrom(ctx, namespace, name, policy)[policy] {
		logr.FromContextOrDiscard(ctx).V(1).Info("exempt", "policy", policy, "namespace", namespace, "name", name)
		return true
	}
	return false
}

// exemptFrom is every policy (of only, when given) an Exemption exempts the
// object name of namespace from: an entry whose matcher names the namespace
// and matches the name lists it. Only Exemptions in uds-policy-exemptions
// count, unless the ClusterConfig allows all namespaces (read only when an
// Exemption elsewhere matches), and only for a namespace a trusted identity
// created (trust.go). Only an entry that names the namespace and a policy
// asked for has its name matched, within the request's budget (see
// Matcher): a name that does not compile or is over the budget (the
// Exemption's validation refuses those, but one may be stored while the
// module is down) matches nothing, and once the request's deadline or
// budget is reached no further entry matches. Only matching Exemptions
// count as found: an allow of an object no Exemption names is not made
// again on fresh data.
func (e *exemptions) exemptFrom(ctx context.Context, namespace, name string, only ...Policy) map[Policy]bool {
	log := logr.FromContextOrDiscard(ctx)
	m := names.Matcher(ctx)
	var stopped error
	matches := func(entry ExemptionEntry) bool {
		if entry.Matcher.Namespace != namespace || stopped != nil ||
			len(only) > 0 && !slices.ContainsFunc(entry.Policies, func(p Policy) bool { return slices.Contains(only, p) }) {
			return false
		}
		ok, err := m.Match(entry.Matcher.Name, name)
		if errors.Is(err, pattern.ErrStopped) {
			stopped = err
		} else if err != nil {
			log.V(1).Info("an Exemption entry's matcher name matches nothing", "namespace", namespace, "name", name, "err", err.Error())
		}
		return ok
	}
	out := map[Policy]bool{}
	found, err := e.lister.Find(ctx, func(u *unstructured.Unstructured) bool { return slices.ContainsFunc(e.entries(u), matches) })
	if err != nil {
		log.Error(err, "the Exemptions cannot be read: none applies", "namespace", namespace, "name", name)
		return out
	}
	if stopped != nil {
		log.Error(stopped, "the Exemptions' names were not all matched: those left apply to nothing", "namespace", namespace, "name", name)
	}
	found = e.trust.claimable(ctx, found, namespace)
	allowAll := sync.OnceValue(func() bool { return e.cfg.allowAllNsExemptions(ctx) })
	for _, u := range found {
		if u.GetNamespace() != ExemptionsNamespace && !allowAll() {
			continue
		}
		for _, entry := range e.entries(u) {
			if matches(entry) {
				for _, p := range entry.Policies {
					out[p] = true
				}
			}
		}
	}
	return out
}

// declareExemptionValidation validates Exemptions at admission as UDS
// Core's operator does: in uds-policy-exemptions unless the ClusterConfig
// allows all namespaces; each policy one its matcher's kind may be exempted
// from; each matcher name a regular expression without JavaScript's
// slashes, within names' budget.
func declareExemptionValidation(operator *vigil.Capability, cfg *config) {
	vigil.When(operator, vigil.Kind(group, version, "Exemption")).IsCreatedOrUpdated().Named("exemption-validator").
		Validate(func(ctx context.Context, r *vigil.Request[*unstructured.Unstructured]) vigil.Verdict {
			if msg := validateExemption(r.Object, cfg.allowAllNsExemptions(ctx)); msg != "" {
				return admission.Deny(msg)
			}
			return admission.Allow()
		})
}

// validateExemption is the denial of an Exemption UDS Core refuses, or "".
func validateExemption(u *unstructured.Unstructured, allowAll bool) string {
	if !allowAll && u.GetNamespace() != ExemptionsNamespace {
		return fmt.Sprintf(`Invalid namespace "%s" for UDSExemption %s: must be "%s"`, u.GetNamespace(), u.GetName(), ExemptionsNamespace)
	}
	var ex Exemption
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ex); err != nil {
		return fmt.Sprintf("Invalid UDSExemption %s: %v", u.GetName(), err)
	}
	for _, e := range ex.Spec.Exemptions {
		kind := e.Matcher.Kind
		if kind == "" {
			kind = "pod"
		}
		for _, p := range e.Policies {
			service := slices.Contains(ServicePolicies, p)
			if service != (kind == "service") {
				valid := "service"
				if kind != "pod" {
					valid = "pod"
				}
				return fmt.Sprintf(`Invalid kind "%s" for matcher "%s" with policy "%s": "%s" can only be exempted for kind "%s"`, kind, e.Matcher.Name, p, p, valid)
			}
		}
	}
	for _, e := range ex.Spec.Exemptions {
		n := e.Matcher.Name
		if len(n) > 0 && n[0] == '/' && n[len(n)-1] == '/' {
			return fmt.Sprintf(`Invalid matcher name "%s": please remove the leading and trailing slashes`, n)
		}
		if err := names.Check(n); err != nil {
			if len(n) > 64 {
				n = n[:64] + "…"
			}
			return fmt.Sprintf("Invalid regular expression pattern %s: %v", n, err)
		}
	}
	return ""
}
