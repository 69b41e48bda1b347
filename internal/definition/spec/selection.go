package spec

import (
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Agreed is the server-side selection of one type's informer: only what
// every user agrees on.
type Agreed struct {
	GVK schema.GroupVersionKind
	// Metadata: the informer holds each object's metadata alone
	// (vigil.Metadata); a kind read both ways has an informer each way.
	Metadata   bool
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
	type key struct {
		gvk  schema.GroupVersionKind
		meta bool
	}
	byKey := map[key][]Lister{}
	var order []key
	for _, u := range users {
		k := key{gvk: u.GVK}
		if u.New != nil {
			_, k.meta = u.New().(*metav1.PartialObjectMetadata)
		}
		if _, ok := byKey[k]; !ok {
			order = append(order, k)
		}
		byKey[k] = append(byKey[k], u)
	}
	sort.Slice(order, func(i, j int) bool {
		if a, b := order[i].gvk.String(), order[j].gvk.String(); a != b {
			return a < b
		}
		return !order[i].meta && order[j].meta
	})
	// The selection is agreed per kind, over both ways of reading it: the
	// informer cache keeps one selection per kind (controller-runtime's
	// ByObject is keyed by kind), so a whole and a metadata informer of one
	// kind must select the same objects, or one would miss the other's.
	byGVK := map[schema.GroupVersionKind][]Lister{}
	for _, u := range users {
		byGVK[u.GVK] = append(byGVK[u.GVK], u)
	}
	out := make([]Agreed, 0, len(order))
	for _, k := range order {
		a := agreeOn(byGVK[k.gvk])
		a.GVK, a.Metadata, a.New = k.gvk, k.meta, byKey[k][0].New
		out = append(out, a)
	}
	return out
}

// agreeOn is the selection every one of us agrees on.
func agreeOn(us []Lister) Agreed {
	a := Agreed{Labels: us[0].Select.Labels, Name: us[0].Select.Name}
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
	return a
}

// Selects says what the informer selects, in words: its namespaces, labels
// and name, or everything, cluster-wide.
func (a Agreed) Selects() string {
	var sel []string
	if len(a.Namespaces) > 0 {
		sel = append(sel, "namespaces "+strings.Join(a.Namespaces, ","))
	}
	if a.Labels != "" {
		sel = append(sel, "labels "+a.Labels)
	}
	if a.Name != "" {
		sel = append(sel, "name "+a.Name)
	}
	if len(sel) == 0 {
		return "everything, cluster-wide"
	}
	return strings.Join(sel, "; ")
}
