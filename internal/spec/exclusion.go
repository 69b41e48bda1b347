package spec

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Exclusion is one object a module's webhooks and checks never see, because
// one of its gates waits for it: were they to stand in its way, the module
// could not start. It names exactly one object — kind, namespace and name of
// a namespaced kind, kind and name of a cluster-scoped one — never a name in
// every namespace, which would exempt every object of that kind and name a
// tenant creates anywhere.
//
// Exclusions computes them once; the webhooks' and the checks' match
// conditions, the deadlock analysis and plan render them.
type Exclusion struct {
	Group   string `json:"group"`
	Version string `json:"version"`
	Kind    string `json:"kind"`
	// Namespace of a namespaced object; empty for a cluster-scoped one.
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Scope is what the definition knows of the kind: Namespaced,
	// ClusterScoped, or ScopeUnknown for a kind outside Kubernetes' own
	// groups (a CRD's), which is excluded as cluster-scoped — only an object
	// outside every namespace matches it — and checked against the API
	// server when the module registers (Unverified).
	Scope Scope `json:"scope"`
	// Gate and Site are the first gate that waits for it, and where it was
	// declared.
	Gate string `json:"gate"`
	Site string `json:"site"`
}

// ExclusionOf is the exclusion a gate's wait for w needs: exactly that
// object. ok is false when w names no one object: a selector, or a name in
// every namespace of a namespaced kind (which no exclusion may cover; see
// Module.ExclusionProblems).
func ExclusionOf(w Object) (e Exclusion, ok bool) {
	if w.Name == "" || w.Kind == "" {
		return Exclusion{}, false
	}
	e = Exclusion{Group: w.Group, Version: w.Version, Kind: w.Kind, Namespace: w.Namespace, Name: w.Name, Scope: ScopeOf(w.Group, w.Kind)}
	switch {
	case w.Namespace != "":
		// The gate looks in one namespace: the object is there.
		e.Scope = Namespaced
	case e.Scope == Namespaced:
		return Exclusion{}, false
	}
	return e, true
}

// Exclusions are the objects the module's webhooks and checks never see: one
// per object its gates wait for by name, in one namespace or cluster-scoped,
// sorted by kind, namespace and name.
func (m *Module) Exclusions() []Exclusion {
	var out []Exclusion
	for _, g := range m.Gates() {
		if g.Waits == nil {
			continue
		}
		e, ok := ExclusionOf(*g.Waits)
		if !ok || slices.ContainsFunc(out, func(o Exclusion) bool { return o.Same(e) }) {
			continue
		}
		e.Gate, e.Site = g.Name, g.Site
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b Exclusion) int {
		return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// Same reports whether e and o exclude the same object.
func (e Exclusion) Same(o Exclusion) bool {
	return e.Group == o.Group && e.Kind == o.Kind && e.Namespace == o.Namespace && e.Name == o.Name
}

// Covers reports whether creating or changing o is excluded by e: the same
// kind, namespace and name.
func (e Exclusion) Covers(o Object) bool {
	return o.Name != "" && e.Group == o.Group && e.Kind == o.Kind && e.Namespace == o.Namespace && e.Name == o.Name
}

// Unverified reports whether e is excluded as cluster-scoped without the
// definition knowing that its kind is.
func (e Exclusion) Unverified() bool { return e.Scope == ScopeUnknown }

// String is the object, as plan shows it: "ConfigMap settings in namespace
// apps", "ClusterConfig initial (cluster-scoped)".
func (e Exclusion) String() string {
	switch {
	case e.Namespace != "":
		return fmt.Sprintf("%s %s in namespace %s", e.Kind, e.Name, e.Namespace)
	case e.Scope == ClusterScoped:
		return fmt.Sprintf("%s %s (cluster-scoped)", e.Kind, e.Name)
	default:
		return fmt.Sprintf("%s %s (cluster-scoped; the admission role refuses to register if %s is a namespaced kind its webhooks or checks govern)", e.Kind, e.Name, e.Kind)
	}
}

// Governs are the module's webhooks and checks that see requests for objects
// of the kind, as "webhook capability/name (site)" or "check
// capability/name (site)".
func (m *Module) Governs(group, kind string) []string {
	same := func(g, k string) bool { return g == group && k == kind }
	var out []string
	for _, b := range m.Bindings {
		if same(b.GVK.Group, b.GVK.Kind) || same(b.ResourceKind().Group, b.ResourceKind().Kind) {
			out = append(out, fmt.Sprintf("webhook %s (%s)", b.ID(), b.Site))
		}
	}
	for _, c := range m.Checks {
		if same(c.GVK.Group, c.GVK.Kind) || same(c.ResourceKind().Group, c.ResourceKind().Kind) {
			out = append(out, fmt.Sprintf("check %s (%s)", c.ID(), c.Site))
		}
	}
	return out
}

// ExclusionProblems are the gates that would need a wider exclusion than one
// object: a gate that waits by name, in every namespace, for an object of a
// namespaced kind that one of the module's webhooks or checks governs. Each
// names the gate's call site and says what to do.
func (m *Module) ExclusionProblems() []error {
	var errs []error
	for _, g := range m.Gates() {
		w := g.Waits
		if w == nil || w.Name == "" {
			continue
		}
		by := m.Governs(w.Group, w.Kind)
		if len(by) == 0 {
			continue
		}
		switch scope := ScopeOf(w.Group, w.Kind); {
		case w.Namespace == "" && scope == Namespaced:
			errs = append(errs, WideGateError(g.Site, g.Name, w.Kind, w.Name, by))
		case w.Namespace != "" && scope == ClusterScoped:
			// Its exclusion, in a namespace, would never match it.
			errs = append(errs, fmt.Errorf("%s: gate %s waits for the %s named %s in namespace %s, but %ss are cluster-scoped, so %s could not exclude it and could stand in the module's way: drop InNamespace", g.Site, g.Name, w.Kind, w.Name, w.Namespace, w.Kind, strings.Join(by, ", ")))
		}
	}
	return errs
}

// WideGateError is the mistake of gate name at site, which waits for the
// kind's object of that name in every namespace while by govern the kind.
func WideGateError(site, gate, kind, name string, by []string) error {
	verb := "governs"
	if len(by) > 1 {
		verb = "govern"
	}
	return fmt.Errorf("%s: gate %s waits for the %s named %s in every namespace, and %s %s %ss: excluding it from them would exempt every %s named %s in every namespace, a tenant's too, so it is not excluded and they could stand in the module's way: add .InNamespace(namespace) to the gate, naming the namespace the %s is in",
		site, gate, kind, name, strings.Join(by, ", "), verb, kind, kind, name, kind)
}
