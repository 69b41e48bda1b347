package spec

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
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

// ExclusionPolicy is everything a module's webhooks and checks never see,
// written once: the namespaces the module runs in and the cluster's own
// (Namespaces), the cluster's plumbing (Plumbing), the objects its gates
// wait for (Objects), and, for one capability, the namespaces it is limited
// to (Only) and its opt-out label (OptOut). It renders to the webhooks'
// namespaceSelector, objectSelector and matchConditions, to the checks'
// matchConstraints and matchConditions, and to plan's words; Admits
// evaluates it in Go, as the API server evaluates what it renders, for the
// deadlock analysis.
type ExclusionPolicy struct {
	// Namespaces no webhook or check matches, sorted, nor the Namespaces
	// themselves.
	Namespaces []string
	// Plumbing are the kinds no webhook or check matches.
	Plumbing []schema.GroupKind
	// Objects are the objects the module's gates wait for (Exclusions).
	Objects []Exclusion
	// Only are the namespaces the capability is limited to; empty for all.
	Only []string
	// OptOut is the capability's opt-out label; empty when it has none.
	OptOut string
	// OptIn is the capability's opt-in label: only namespaces labelled
	// with it are seen; empty when it has none.
	OptIn string
	// Allowed may set, change or remove the opt-out label, which Guard
	// (a policy name) guards: what plan says of it.
	Allowed []string
	Guard   string
}

// Plumbing are the kinds no webhook or check ever matches, by a match
// condition: the cluster's own plumbing, which a webhook must never stand in
// the way of.
var Plumbing = []schema.GroupKind{
	{Group: "", Kind: "Node"},
	{Group: "coordination.k8s.io", Kind: "Lease"},
	{Group: "certificates.k8s.io", Kind: "CertificateSigningRequest"},
}

// IsPlumbing reports whether a kind is one of Plumbing.
func IsPlumbing(group, kind string) bool {
	return slices.Contains(Plumbing, schema.GroupKind{Group: group, Kind: kind})
}

// ExcludedNamespaces are the namespaces no webhook or check of a module
// running in namespace own ever matches, sorted: its own, kube-system and
// kube-node-lease (the Kubernetes admission webhook good practices), and
// those the module ignores (Module.IgnoredNamespaces).
func ExcludedNamespaces(own string, ignored ...string) []string {
	out := append([]string{own, metav1.NamespaceSystem, corev1.NamespaceNodeLease}, ignored...)
	slices.Sort(out)
	return slices.Compact(out)
}

// NewExclusionPolicy is the exclusion policy of a module running in
// namespace, ignoring the namespaces ignored, whose gates wait for objects:
// the same for every capability
// until For or Of narrows it.
func NewExclusionPolicy(namespace string, ignored []string, objects []Exclusion) ExclusionPolicy {
	return ExclusionPolicy{Namespaces: ExcludedNamespaces(namespace, ignored...), Plumbing: slices.Clone(Plumbing), Objects: objects}
}

// ExclusionPolicy is the module's exclusion policy, before any capability's
// namespaces or opt-out label.
func (m *Module) ExclusionPolicy() ExclusionPolicy {
	return NewExclusionPolicy(m.Namespace, m.IgnoredNamespaces, m.Exclusions())
}

// For is p for a capability limited to namespaces only (empty: all) with
// opt-out label optOut (empty: none).
func (p ExclusionPolicy) For(only []string, optOut string) ExclusionPolicy {
	p.Only, p.OptOut = only, optOut
	return p
}

// WithOptIn is p for a capability with opt-in label optIn (empty: none).
func (p ExclusionPolicy) WithOptIn(optIn string) ExclusionPolicy {
	p.OptIn = optIn
	return p
}

// Of is p for the module's capability c, with what plan says of its
// opt-out or opt-in label.
func (p ExclusionPolicy) Of(module string, c Capability) ExclusionPolicy {
	p = p.For(c.Namespaces, c.OptOutLabel()).WithOptIn(c.OptInLabel())
	switch {
	case c.OptOut != nil:
		p.Allowed, p.Guard = c.OptOut.Allowed, GuardName(module, c.Name)
	case c.OptIn != nil:
		p.Allowed, p.Guard = c.OptIn.Allowed, OptInGuardName(module, c.Name)
	}
	return p
}

// NamespaceSelector keeps the webhooks and checks out of p.Namespaces and,
// with an opt-out label, out of namespaces labelled with it; a capability
// limited to namespaces gets only those.
func (p ExclusionPolicy) NamespaceSelector() *metav1.LabelSelector {
	s := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpNotIn, Values: slices.Clone(p.Namespaces)},
	}}
	if p.OptOut != "" {
		s.MatchExpressions = append(s.MatchExpressions, metav1.LabelSelectorRequirement{
			Key: p.OptOut, Operator: metav1.LabelSelectorOpNotIn, Values: []string{OptOutValue},
		})
	}
	if len(p.Only) > 0 {
		s.MatchExpressions = append(s.MatchExpressions, metav1.LabelSelectorRequirement{
			Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpIn, Values: slices.Clone(p.Only),
		})
	}
	if p.OptIn != "" {
		s.MatchExpressions = append(s.MatchExpressions, metav1.LabelSelectorRequirement{
			Key: p.OptIn, Operator: metav1.LabelSelectorOpIn, Values: []string{OptOutValue},
		})
	}
	return s
}

// ObjectSelector keeps objects labelled with the opt-out label away; nil
// (every object) without one.
func (p ExclusionPolicy) ObjectSelector() *metav1.LabelSelector {
	if p.OptOut == "" {
		return nil
	}
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: p.OptOut, Operator: metav1.LabelSelectorOpNotIn, Values: []string{OptOutValue}},
	}}
}

// MatchConditions keep the plumbing away (not-cluster-plumbing) and exclude
// exactly p.Objects (not-gated-objects), so the module's webhooks and checks
// never stand in its own way.
func (p ExclusionPolicy) MatchConditions() []admissionregistrationv1.MatchCondition {
	var plumbing []string
	for _, gk := range p.Plumbing {
		plumbing = append(plumbing, fmt.Sprintf(`!(request.kind.group == %q && request.kind.kind == %q)`, gk.Group, gk.Kind))
	}
	conds := []admissionregistrationv1.MatchCondition{{Name: "not-cluster-plumbing", Expression: strings.Join(plumbing, " && ")}}
	if c, ok := p.objectsCondition(); ok {
		conds = append(conds, c)
	}
	return conds
}

// objectsCondition is the match condition not-gated-objects, which keeps
// exactly p.Objects away: each by kind, name and namespace, or,
// cluster-scoped, outside every namespace (a kind of unknown scope too, so
// that an object of that kind and name in a namespace is never excluded). A
// cluster-scoped kind the definition knows carries no namespace term: a
// Namespace's own requests may name it as their namespace.
func (p ExclusionPolicy) objectsCondition() (admissionregistrationv1.MatchCondition, bool) {
	var terms []string
	for _, e := range p.Objects {
		t := fmt.Sprintf(`(request.kind.group == %q && request.kind.kind == %q && request.name == %q`, e.Group, e.Kind, e.Name)
		switch {
		case e.Namespace != "":
			t += fmt.Sprintf(` && request.namespace == %q`, e.Namespace)
		case e.Scope != ClusterScoped:
			t += ` && request.namespace == ""`
		}
		terms = append(terms, t+")")
	}
	if len(terms) == 0 {
		return admissionregistrationv1.MatchCondition{}, false
	}
	slices.Sort(terms)
	return admissionregistrationv1.MatchCondition{Name: "not-gated-objects", Expression: "!(" + strings.Join(terms, " || ") + ")"}, true
}

// Lines are p in words, for plan: what a capability's webhooks never see,
// which passes unchecked even while the module enforces.
func (p ExclusionPolicy) Lines() []string {
	out := []string{
		"objects in namespaces " + strings.Join(p.Namespaces, ", ") + ", and those Namespaces themselves (namespaceSelector)",
	}
	var plumbing []string
	for _, gk := range p.Plumbing {
		if gk.Group == "" {
			plumbing = append(plumbing, gk.Kind+"s")
		} else {
			plumbing = append(plumbing, gk.Kind+"s ("+gk.Group+")")
		}
	}
	out = append(out, strings.Join(plumbing, ", ")+": cluster plumbing (matchCondition)")
	for _, e := range p.Objects {
		line := fmt.Sprintf("%s: gate %s (%s) waits for it, so exactly this one object (matchCondition)", e, e.Gate, e.Site)
		if e.Namespace != "" && slices.Contains(p.Namespaces, e.Namespace) {
			line += "; its namespace is excluded anyway"
		}
		out = append(out, line)
	}
	if p.OptOut != "" {
		out = append(out, fmt.Sprintf("namespaces and objects labelled %s=%s, and every object in such a namespace (namespaceSelector, objectSelector); only %s may set, change or remove the label (ValidatingAdmissionPolicy %s)",
			p.OptOut, OptOutValue, strings.Join(p.Allowed, ", "), p.Guard))
	}
	if p.OptIn != "" {
		out = append(out, fmt.Sprintf("objects in namespaces not labelled %s=%s (namespaceSelector: the capability is opt-in; cluster-scoped objects other than Namespaces are still seen); only %s may set, change or remove the label (ValidatingAdmissionPolicy %s)",
			p.OptIn, OptOutValue, strings.Join(p.Allowed, ", "), p.Guard))
	}
	return out
}

// AdmissionRequest is a request as the exclusion policy sees it.
type AdmissionRequest struct {
	Group, Version, Kind string
	// Namespace is the request's: the object's namespace, or a Namespace's
	// own name; empty for any other cluster-scoped object.
	Namespace string
	Name      string
	// Labels are the object's; NamespaceLabels its namespace's (a
	// Namespace's own), besides kubernetes.io/metadata.name, which every
	// namespace carries.
	Labels          map[string]string
	NamespaceLabels map[string]string
}

// Admits reports whether a webhook or check under p sees the request: what
// the API server decides from NamespaceSelector, ObjectSelector and
// MatchConditions.
func (p ExclusionPolicy) Admits(r AdmissionRequest) bool {
	if IsPlumbing(r.Group, r.Kind) {
		return false // not-cluster-plumbing
	}
	for _, e := range p.Objects {
		if e.excludes(r) {
			return false // not-gated-objects
		}
	}
	if ns := r.Namespace; ns != "" {
		// The namespace selector looks at the object's namespace, or at the
		// Namespace itself; other cluster-scoped objects pass it.
		if slices.Contains(p.Namespaces, ns) || (len(p.Only) > 0 && !slices.Contains(p.Only, ns)) {
			return false
		}
		if p.OptOut != "" && r.NamespaceLabels[p.OptOut] == OptOutValue {
			return false
		}
		if p.OptIn != "" && r.NamespaceLabels[p.OptIn] != OptOutValue {
			return false
		}
	}
	return p.OptOut == "" || r.Labels[p.OptOut] != OptOutValue
}

// excludes is e's term of not-gated-objects, on r.
func (e Exclusion) excludes(r AdmissionRequest) bool {
	if r.Group != e.Group || r.Kind != e.Kind || r.Name != e.Name {
		return false
	}
	switch {
	case e.Namespace != "":
		return r.Namespace == e.Namespace
	case e.Scope != ClusterScoped:
		return r.Namespace == ""
	}
	return true
}

// IgnoreNamespaces adds namespaces to those the module keeps away from
// (IgnoredNamespaces): every webhook and check of the module skips them,
// every watch leaves their objects alone, and a watch of Namespaces the
// ignored Namespaces themselves, as the webhooks do. The definition's own
// (Options.IgnoredNamespaces) come first; a deployment adds more with
// --ignore-namespace (the chart's ignoredNamespaces).
func (m *Module) IgnoreNamespaces(namespaces ...string) {
	var add []string
	for _, ns := range namespaces {
		if !slices.Contains(m.IgnoredNamespaces, ns) && !slices.Contains(add, ns) {
			add = append(add, ns)
		}
	}
	if len(add) == 0 {
		return
	}
	m.IgnoredNamespaces = append(slices.Clone(m.IgnoredNamespaces), add...)
	m.Watches = slices.Clone(m.Watches) // a copy of a Module leaves the original's be
	ignored, named := NotInNamespace(add...), NotNamed(add...)
	for i := range m.Watches {
		f := ignored
		if gvk := m.Watches[i].GVK; gvk.Group == "" && gvk.Kind == "Namespace" {
			f = named
		}
		m.Watches[i].Filters = append(slices.Clone(m.Watches[i].Filters), f)
	}
}
