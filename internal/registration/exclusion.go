package registration

import (
	"fmt"
	"slices"
	"strings"

	"github.com/vigilkit/vigil/internal/spec"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GatedObjects are the objects the module's webhooks and checks exclude
// (Options.Gated): spec.Module.Exclusions.
func GatedObjects(m *spec.Module) []spec.Exclusion { return m.Exclusions() }

// exclusionCondition is the match condition not-gated-objects, which keeps
// exactly the excluded objects away: each by kind, name and namespace, or,
// cluster-scoped, outside every namespace (a kind of unknown scope too, so
// that an object of that kind and name in a namespace is never excluded).
// A cluster-scoped kind the definition knows carries no namespace term: a
// Namespace's own requests may name it as their namespace.
func exclusionCondition(excluded []spec.Exclusion) (admissionregistrationv1.MatchCondition, bool) {
	var terms []string
	for _, e := range excluded {
		t := fmt.Sprintf(`(request.kind.group == %q && request.kind.kind == %q && request.name == %q`, e.Group, e.Kind, e.Name)
		switch {
		case e.Namespace != "":
			t += fmt.Sprintf(` && request.namespace == %q`, e.Namespace)
		case e.Scope != spec.ClusterScoped:
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

// VerifyExclusions asks mapper the scope of each kind the definition could
// not tell (spec.Exclusion.Unverified) that one of the module's webhooks or
// checks governs: such an exclusion is rendered as cluster-scoped, so a kind
// that turns out namespaced is a gate that waits by name in every namespace
// and would need a wider one — the mistake spec.Module.ExclusionProblems
// finds for the kinds it knows. The error names the gate's call site and
// what to do; a kind the API server does not serve is an error too.
func VerifyExclusions(mapper meta.RESTMapper, m *spec.Module) error {
	var errs []string
	for _, e := range m.Exclusions() {
		if !e.Unverified() {
			continue
		}
		by := m.Governs(e.Group, e.Kind)
		if len(by) == 0 {
			continue
		}
		mapping, err := mapper.RESTMapping(schema.GroupKind{Group: e.Group, Kind: e.Kind}, e.Version)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: gate %s waits for %s %s: whether %s is namespaced, which decides what %s must exclude, cannot be told: %v: install the kind's CustomResourceDefinition before the module, or give the gate InNamespace when the kind is namespaced",
				e.Site, e.Gate, e.Kind, e.Name, schema.GroupVersionKind{Group: e.Group, Version: e.Version, Kind: e.Kind}, strings.Join(by, ", "), err))
			continue
		}
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			errs = append(errs, spec.WideGateError(e.Site, e.Gate, e.Kind, e.Name, by).Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("gated objects: %s", strings.Join(errs, "; "))
	}
	return nil
}

// namespaceSelector keeps the webhooks out of the namespaces
// ExcludedNamespaces names and the configured ones, and, when the capability
// has an opt-out label, out of namespaces labelled with it; a capability
// limited to namespaces gets only those.
func (r *Registrar) namespaceSelector(only []string, optOut string) *metav1.LabelSelector {
	return namespaceSelector(ExcludedNamespaces(r.opts.Namespace), only, optOut)
}

func namespaceSelector(excluded, only []string, optOut string) *metav1.LabelSelector {
	s := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpNotIn, Values: excluded},
	}}
	if optOut != "" {
		s.MatchExpressions = append(s.MatchExpressions, metav1.LabelSelectorRequirement{
			Key: optOut, Operator: metav1.LabelSelectorOpNotIn, Values: []string{spec.OptOutValue},
		})
	}
	if len(only) > 0 {
		s.MatchExpressions = append(s.MatchExpressions, metav1.LabelSelectorRequirement{
			Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpIn, Values: only,
		})
	}
	return s
}

// objectSelector keeps objects labelled with the capability's opt-out label
// away; nil (every object) when it has none.
func objectSelector(optOut string) *metav1.LabelSelector {
	if optOut == "" {
		return nil
	}
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: optOut, Operator: metav1.LabelSelectorOpNotIn, Values: []string{spec.OptOutValue}},
	}}
}

// ExcludedNamespaces are the namespaces no webhook of a module running in
// namespace own ever matches, sorted: its own, kube-system and
// kube-node-lease (the Kubernetes admission webhook good practices).
func ExcludedNamespaces(own string) []string {
	out := []string{own, metav1.NamespaceSystem, corev1.NamespaceNodeLease}
	slices.Sort(out)
	return slices.Compact(out)
}

// Plumbing are the kinds no webhook ever matches, by a match condition: the
// cluster's own plumbing, which a webhook must never stand in the way of.
var Plumbing = []schema.GroupKind{
	{Group: "", Kind: "Node"},
	{Group: "coordination.k8s.io", Kind: "Lease"},
	{Group: "certificates.k8s.io", Kind: "CertificateSigningRequest"},
}

// IsPlumbing reports whether a kind is one of Plumbing.
func IsPlumbing(group, kind string) bool {
	return slices.Contains(Plumbing, schema.GroupKind{Group: group, Kind: kind})
}

// matchConditions keep cluster plumbing away and exclude exactly the objects
// the module's gates wait for, so its webhooks never stand in its own way.
func (r *Registrar) matchConditions() []admissionregistrationv1.MatchCondition {
	return matchConditions(r.opts.Gated)
}

func matchConditions(excluded []spec.Exclusion) []admissionregistrationv1.MatchCondition {
	var plumbing []string
	for _, gk := range Plumbing {
		plumbing = append(plumbing, fmt.Sprintf(`!(request.kind.group == %q && request.kind.kind == %q)`, gk.Group, gk.Kind))
	}
	conds := []admissionregistrationv1.MatchCondition{{Name: "not-cluster-plumbing", Expression: strings.Join(plumbing, " && ")}}
	if c, ok := exclusionCondition(excluded); ok {
		conds = append(conds, c)
	}
	return conds
}
