package spec

import (
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// plurals are the resources of kinds whose plural is not the one
// Kubernetes guesses from the kind (a CRD may name any plural, as UDS
// Core's ClusterConfig names clusterconfig): what RBAC rules, webhook rules
// and admission policies must name. A kind's plural is a fact about the
// kind, as its Go type in a scheme is, so one table serves every module of
// the process.
var plurals sync.Map // schema.GroupKind → string

// SetPlural records the resource (plural) of a kind.
func SetPlural(gk schema.GroupKind, plural string) { plurals.Store(gk, plural) }

// ResourceOf is the kind's resource: its recorded plural, or else the one
// Kubernetes guesses (pods, ingresses, networkpolicies).
func ResourceOf(gvk schema.GroupVersionKind) string {
	if p, ok := plurals.Load(gvk.GroupKind()); ok {
		return p.(string)
	}
	gvr, _ := meta.UnsafeGuessKindToResource(gvk)
	return gvr.Resource
}
