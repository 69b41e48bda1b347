package finalizers

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/internal/definition/spec"
)

// Finalized is a kind some Finalize binding adds finalizers to.
type Finalized struct {
	GVK schema.GroupVersionKind
	// Namespaces to look in; all when empty.
	Namespaces []string
}

// RemoveFinalizers strips the module's finalizers from every object of the
// kinds, so that nothing is left stuck in deletion once the module is gone.
// It returns how many objects it changed.
func RemoveFinalizers(ctx context.Context, c client.Client, module string, kinds []Finalized) (int, error) {
	prefix := spec.FinalizerPrefix(module)
	changed := 0
	for _, k := range kinds {
		namespaces := k.Namespaces
		if len(namespaces) == 0 {
			namespaces = []string{metav1.NamespaceAll}
		}
		for _, ns := range namespaces {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(k.GVK.GroupVersion().WithKind(k.GVK.Kind + "List"))
			if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
				if meta.IsNoMatchError(err) {
					break // the kind is no longer served: nothing of it is stuck
				}
				return changed, fmt.Errorf("list %s in %q to remove finalizers: %w", k.GVK.Kind, ns, err)
			}
			for i := range list.Items {
				if !hasPrefixed(list.Items[i].GetFinalizers(), prefix) {
					continue
				}
				key := client.ObjectKeyFromObject(&list.Items[i])
				err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
					obj := &unstructured.Unstructured{}
					obj.SetGroupVersionKind(k.GVK)
					if err := c.Get(ctx, key, obj); err != nil {
						return err
					}
					var keep []string
					for _, f := range obj.GetFinalizers() {
						if !strings.HasPrefix(f, prefix) {
							keep = append(keep, f)
						}
					}
					orig := obj.DeepCopy()
					obj.SetFinalizers(keep)
					return c.Patch(ctx, obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
				})
				if apierrors.IsNotFound(err) {
					continue
				}
				if err != nil {
					return changed, fmt.Errorf("remove finalizers from %s %s: %w", k.GVK.Kind, key, err)
				}
				changed++
			}
		}
	}
	return changed, nil
}

func hasPrefixed(finalizers []string, prefix string) bool {
	for _, f := range finalizers {
		if strings.HasPrefix(f, prefix) {
			return true
		}
	}
	return false
}
