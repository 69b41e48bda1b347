package spec

import (
	"slices"
	"sort"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Agreed is the server-side selection of one type's informer: only what
// every user agrees on.
type Agreed struct {
	GVK        schema.GroupVersionKind
	New        func() client.Object
	Namespaces []string
	Labels     string
	Name       string
}

// Agree computes, per type, the selection every user of it agrees on: the
// union of their namespaces if each is limited to some, their label selector
// if it is the same for all, the name if all name the same object. What is
// not agreed on is filtered in process by each binding.
func Agree(users []Lister) []Agreed {
	byGVK := map[schema.GroupVersionKind][]Lister{}
	var order []schema.GroupVersionKind
	for _, u := range users {
		if _, ok := byGVK[u.GVK]; !ok {
			order = append(order, u.GVK)
		}
		byGVK[u.GVK] = append(byGVK[u.GVK], u)
	}
	sort.Slice(order, func(i, j int) bool { return order[i].String() < order[j].String() })
	out := make([]Agreed, 0, len(order))
	for _, gvk := range order {
		us := byGVK[gvk]
		a := Agreed{GVK: gvk, New: us[0].New, Labels: us[0].Select.Labels, Name: us[0].Select.Name}
		allLimited := true
		var namespaces []string
		for _, u := range us {
			if len(u.Select.Namespaces) == 0 {
				allLimited = false
			}
			namespaces = append(namespaces, u.Select.Namespaces...)
			if u.Select.Labels != a.Labels {
				a.Labels = ""
			}
			if u.Select.Name != a.Name {
				a.Name = ""
			}
		}
		if allLimited {
			slices.Sort(namespaces)
			a.Namespaces = slices.Compact(namespaces)
		}
		out = append(out, a)
	}
	return out
}
