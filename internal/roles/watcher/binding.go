package watcher

import (
	"errors"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/internal/definition/spec"
)

func wants(b *spec.Watch, ev spec.Event) bool {
	if len(b.Events) == 0 {
		return true
	}
	for _, e := range b.Events {
		if e == ev {
			return true
		}
	}
	return false
}

// matches applies the binding's namespaces and filters to obj.
func matches(b *spec.Watch, obj client.Object) bool {
	if ns := b.Select.Namespaces; len(ns) > 0 {
		found := false
		for _, n := range ns {
			if n == obj.GetNamespace() {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	if len(b.Filters) == 0 {
		return true
	}
	m := spec.Meta{Namespace: obj.GetNamespace(), Object: &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Name: obj.GetName(), Namespace: obj.GetNamespace(), Labels: obj.GetLabels(), Annotations: obj.GetAnnotations(),
		DeletionTimestamp: obj.GetDeletionTimestamp(),
	}}}
	for _, f := range b.Filters {
		if !f.Match(m) {
			return false
		}
	}
	return true
}

// RequeueAfter returns whether err asks for a requeue, and when.
func RequeueAfter(err error) (time.Duration, bool) {
	var r *spec.Requeue
	if errors.As(err, &r) {
		return r.After, true
	}
	return 0, false
}

// ownFinalizers reports whether the change from old to obj is only the
// module's own finalizers coming or going (those of its Finalize bindings,
// spec.FinalizerPrefix): an update nobody else made, which the module's
// handlers are not told of as a change.
func ownFinalizers(module string, old, obj any) bool {
	o, ok1 := old.(client.Object)
	n, ok2 := obj.(client.Object)
	if !ok1 || !ok2 || slices.Equal(o.GetFinalizers(), n.GetFinalizers()) {
		return false
	}
	prefix := spec.FinalizerPrefix(module)
	others := func(fs []string) []string {
		return slices.DeleteFunc(slices.Clone(fs), func(f string) bool { return strings.HasPrefix(f, prefix) })
	}
	if !slices.Equal(others(o.GetFinalizers()), others(n.GetFinalizers())) {
		return false
	}
	a, b := o.DeepCopyObject().(client.Object), n.DeepCopyObject().(client.Object)
	for _, x := range []client.Object{a, b} {
		x.SetFinalizers(nil)
		x.SetResourceVersion("")
		x.SetManagedFields(nil)
	}
	return equality.Semantic.DeepEqual(a, b)
}
