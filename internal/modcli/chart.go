package modcli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/store/v1alpha1"

	"github.com/vigilkit/vigil/internal/chart"
	"github.com/vigilkit/vigil/internal/manifests"
	"github.com/vigilkit/vigil/internal/spec"
)

// ChartOptions are the options of `<module> chart`.
type ChartOptions struct {
	Dir           string
	Image         string
	AllowDeadlock bool
}

// Run writes the module's chart.
func (o *ChartOptions) Run(m *spec.Module, out io.Writer) error {
	if o.Dir == "" {
		return errors.New("-o: expected the folder to write the chart into, as in `chart -o ./chart --image ghcr.io/acme/module:1.0.0`")
	}
	if cycles := findDeadlocks(m, nil); len(cycles) > 0 && !o.AllowDeadlock {
		var b strings.Builder
		_ = writeDeadlocks(&b, cycles, nil)
		return fmt.Errorf("%w: refusing to write a chart that would never become ready (--allow-deadlock writes it anyway):%s", ErrDeadlock, strings.TrimRight(b.String(), "\n"))
	}
	if err := chart.Write(m, o.Dir, chart.Options{Image: o.Image}); err != nil {
		return err
	}
	fmt.Fprintf(out, "chart of module %s written to %s\n", m.Name, o.Dir)
	return nil
}

// StopWatcher scales the module's watcher Deployment to 0 and waits until
// its pods are gone: `unregister --stop-watcher`, so that no watcher adds a
// finalizer while they are removed. A missing Deployment is already
// stopped.
func StopWatcher(ctx context.Context, cfg *rest.Config, m *spec.Module, timeout time.Duration) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	name := manifests.ServiceAccount(m.Name, manifests.Watcher) // the watcher Deployment's name too
	_, err = cs.AppsV1().Deployments(m.Namespace).Patch(ctx, name, types.MergePatchType, []byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{FieldManager: "vigil-unregister"})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("scale the watcher Deployment %s/%s to 0: %w", m.Namespace, name, err)
	}
	sel := labels.SelectorFromSet(map[string]string{"app.kubernetes.io/name": m.Name, "app.kubernetes.io/component": manifests.Watcher}).String()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		pods, err := cs.CoreV1().Pods(m.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err == nil && running(pods.Items) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return fmt.Errorf("wait for the watcher's pods to end: %w", err)
			}
			return fmt.Errorf("the watcher's pods (%s in %s) still run after %s: see why they do not stop (kubectl get pods -n %s -l %s), or raise --stop-watcher-timeout", sel, m.Namespace, timeout, m.Namespace, sel)
		case <-time.After(time.Second):
		}
	}
}

func running(pods []corev1.Pod) int {
	n := 0
	for _, p := range pods {
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			n++
		}
	}
	return n
}

// DeleteState deletes what the module made at run time in its namespace:
// its Store, its managed serving certificate Secret and its watcher's
// Lease — `unregister --delete-state`, so that an uninstall leaves nothing
// even in a namespace that stays. Missing ones are already gone.
func DeleteState(ctx context.Context, cfg *rest.Config, m *spec.Module) error {
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return err
	}
	objs := []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: manifests.CertSecret(m.Name)}},
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: spec.WatcherLeaseName(m.Name)}},
	}
	st := &unstructured.Unstructured{}
	st.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("Store"))
	st.SetNamespace(m.Namespace)
	st.SetName(m.Name)
	objs = append(objs, st)
	for _, o := range objs {
		if err := c.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err) {
			return fmt.Errorf("delete %T %s/%s of module %s: %w", o, m.Namespace, o.GetName(), m.Name, err)
		}
	}
	return nil
}
