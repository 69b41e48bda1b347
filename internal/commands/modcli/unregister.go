package modcli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
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

	"github.com/vigilkit/vigil/internal/commands/cmdutil"
	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/roles/admissionrole"
	"github.com/vigilkit/vigil/internal/shipping/manifests"
	"github.com/vigilkit/vigil/store/v1alpha1"
)

func unregisterCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "unregister",
		Short: "Empty the module's webhook configurations (and remove its finalizers), for uninstall",
		Long: `Empty the module's MutatingWebhookConfiguration and ValidatingWebhookConfiguration,
so that nothing is sent to the module any more. Replicas never do this when they
stop; run it before uninstalling.`,
	}
}

// UnregisterFlags are the flags of `<module> unregister`.
type UnregisterFlags struct {
	Kube             cmdutil.KubeFlags
	RemoveFinalizers bool
	StopWatcher      bool
	DeleteState      bool
	StopTimeout      time.Duration
}

// NewUnregisterFlags returns the flags.
func NewUnregisterFlags() *UnregisterFlags { return &UnregisterFlags{} }

// AddFlags declares the flags.
func (f *UnregisterFlags) AddFlags(fs *pflag.FlagSet) {
	f.Kube.AddFlags(fs)
	fs.BoolVar(&f.RemoveFinalizers, "remove-finalizers", false, "also strip the module's finalizers from every object, so that nothing is left stuck in deletion once it is gone")
	fs.BoolVar(&f.StopWatcher, "stop-watcher", false, "first scale the watcher Deployment to 0 and wait until its pods are gone, so that it adds no finalizer behind the removal (the chart's pre-delete hook does)")
	fs.BoolVar(&f.DeleteState, "delete-state", false, "last, delete what the module made at run time in its namespace: its Store, its serving certificate Secret and the watcher's Lease (the chart's pre-delete hook does)")
	fs.DurationVar(&f.StopTimeout, "stop-watcher-timeout", 2*time.Minute, "how long --stop-watcher waits for the watcher's pods to end")
}

// ToOptions loads the client config.
func (f *UnregisterFlags) ToOptions(m *spec.Module, out io.Writer) (*UnregisterOptions, error) {
	cfg, err := f.Kube.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	return &UnregisterOptions{Config: cfg, Module: m, Out: out,
		RemoveFinalizers: f.RemoveFinalizers, StopWatcher: f.StopWatcher, DeleteState: f.DeleteState, StopTimeout: f.StopTimeout}, nil
}

// UnregisterOptions are what an uninstall removes of the module.
type UnregisterOptions struct {
	Config *rest.Config
	Module *spec.Module
	Out    io.Writer
	// RemoveFinalizers strips the module's finalizers from every object.
	RemoveFinalizers bool
	// StopWatcher first stops the watcher (StopWatcher), waiting at most
	// StopTimeout.
	StopWatcher bool
	StopTimeout time.Duration
	// DeleteState last deletes the module's run-time state (DeleteState).
	DeleteState bool
}

// Run stops the watcher, empties the webhook configurations, removes the
// finalizers and deletes the state, as asked, saying each on Out.
func (o *UnregisterOptions) Run(ctx context.Context) error {
	m := o.Module
	if o.StopWatcher {
		if err := StopWatcher(ctx, o.Config, m, o.StopTimeout); err != nil {
			return err
		}
		fmt.Fprintf(o.Out, "watcher of module %s stopped\n", m.Name)
	}
	if err := admissionrole.Unregister(ctx, o.Config, m, o.RemoveFinalizers); err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "webhooks of module %s unregistered\n", m.Name)
	if o.RemoveFinalizers {
		fmt.Fprintf(o.Out, "finalizers of module %s removed\n", m.Name)
	}
	if o.DeleteState {
		if err := DeleteState(ctx, o.Config, m); err != nil {
			return err
		}
		fmt.Fprintf(o.Out, "state of module %s deleted\n", m.Name)
	}
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
