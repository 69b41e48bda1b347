package fresh

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Scope is the part of a lister's type one read looked at: a namespace (every
// one when empty), a label selector in its text form (every object when
// empty) and a name (every name when empty). The zero Scope is the whole
// type, as its informer selects it. A recheck catches the cache up on the
// scopes its decision read, so its round trip costs what the read covered,
// not what the cluster holds.
type Scope struct {
	Namespace, Labels, Name string
}

// Whole reports whether the scope is the whole type.
func (s Scope) Whole() bool { return s == Scope{} }

// KeyScope is the scope of a read of one object by key.
func KeyScope(namespace, name string) Scope { return Scope{Namespace: namespace, Name: name} }

// ListScope is the scope of a list with these options: their namespace and
// label selector. A field selector widens nothing and narrows nothing here:
// the cache may serve fields (its own indexes) that the API server cannot
// select on, so the scope covers every object of the namespace and labels.
func ListScope(opts []client.ListOption) Scope {
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	s := Scope{Namespace: lo.Namespace}
	if lo.LabelSelector != nil && !lo.LabelSelector.Empty() {
		s.Labels = lo.LabelSelector.String()
	}
	return s
}

// matches reports whether an object of namespace ns, name and labels ls is in
// the scope; sel is the scope's parsed label selector (nil for none).
func (s Scope) matches(ns, name string, ls map[string]string, sel labels.Selector) bool {
	if s.Namespace != "" && ns != s.Namespace {
		return false
	}
	if s.Name != "" && name != s.Name {
		return false
	}
	return sel == nil || sel.Matches(labels.Set(ls))
}

// andSelectors joins selectors in their text form, each of which must hold
// (a comma is AND in both label and field selectors); empty ones are left
// out.
func andSelectors(sels ...string) string {
	return strings.Join(slices.DeleteFunc(sels, func(s string) bool { return s == "" }), ",")
}
