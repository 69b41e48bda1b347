package vigiltest

import (
	"context"
	"slices"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// finishNamespaces does in an Env what kube-controller-manager's namespace
// controller does in a cluster: a namespace being deleted has every object
// in it deleted, waits until the last is gone (objects with finalizers are
// waited for, as in a cluster), and then its "kubernetes" finalizer is
// removed, so that the API server removes it. A name a test deleted can be
// created again once the deletion is done, as `kubectl delete namespace`
// waits for. Namespaces made by Env.Namespace, whose names are never used
// again, are left terminating. It runs until ctx ends.
func finishNamespaces(ctx context.Context, cfg *rest.Config) error {
	// It polls, with no informer, and logs through its context only: an
	// informer reads klog's global logger as it runs, which a test may be
	// setting meanwhile (a module's command sets it as it starts).
	ctx = klog.NewContext(ctx, logr.Discard())
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	go func() {
		for sleep(ctx, namespacePoll) == nil {
			// From the watch cache (resourceVersion 0): cheap, and a second
			// late at most.
			list, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
			if err != nil {
				continue
			}
			for _, ns := range list.Items {
				// Namespace's own namespaces have names no test reuses: left
				// terminating, they cost the API server nothing.
				if ns.DeletionTimestamp != nil && ns.Labels[TestNamespaceLabel] == "" {
					_, _ = finishNamespace(ctx, cs, dyn, ns.Name)
				}
			}
		}
	}()
	return nil
}

// namespacePoll is how often the Env looks for namespaces being deleted.
const namespacePoll = 500 * time.Millisecond

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// finishNamespace deletes what namespace name holds and, once nothing is
// left, removes its "kubernetes" finalizer; done once it has, or once the
// namespace is gone.
func finishNamespace(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface, name string) (done bool, err error) {
	ns, err := cs.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	if ns.DeletionTimestamp == nil || !slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
		return true, nil
	}
	lists, err := discovery.ToDiscoveryInterfaceWithContext(cs.Discovery()).ServerPreferredNamespacedResourcesWithContext(ctx)
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return false, err
	}
	left := false
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range list.APIResources {
			if !slices.Contains(r.Verbs, "list") || !slices.Contains(r.Verbs, "deletecollection") {
				continue
			}
			ri := dyn.Resource(gv.WithResource(r.Name)).Namespace(name)
			if err := ri.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsMethodNotSupported(err) {
				left = true
				continue
			}
			if l, err := ri.List(ctx, metav1.ListOptions{Limit: 1}); err == nil && len(l.Items) > 0 {
				left = true // finalizers of their own hold them: wait, as a cluster does
			}
		}
	}
	if left {
		return false, nil
	}
	ns.Spec.Finalizers = slices.DeleteFunc(ns.Spec.Finalizers, func(f corev1.FinalizerName) bool { return f == corev1.FinalizerKubernetes })
	if _, err := cs.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return false, err
	}
	return true, nil
}
