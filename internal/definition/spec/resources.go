package spec

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ResourceOf is the kind's resource: its plural as the module knows it
// (Plurals), or else the one Kubernetes guesses (pods, ingresses,
// networkpolicies). It is what RBAC rules, webhook rules and admission
// policies name.
func (m *Module) ResourceOf(gvk schema.GroupVersionKind) string {
	return resourceOf(gvk, m.Plurals[gvk.GroupKind()])
}

// resourceOf is plural, or the resource Kubernetes guesses from the kind
// when it is empty.
func resourceOf(gvk schema.GroupVersionKind, plural string) string {
	if plural != "" {
		return plural
	}
	gvr, _ := meta.UnsafeGuessKindToResource(gvk)
	return gvr.Resource
}
