package modcli

import (
	"context"
	"fmt"
	"io"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/operating/deadlock"
	"github.com/vigilkit/vigil/internal/runtime/served"
	"github.com/vigilkit/vigil/internal/serving/registration"
	"github.com/vigilkit/vigil/internal/shipping/manifests"
)

// clusterDeadlocks reads the cluster's webhook configurations and finds the
// deadlocks between the module's fail-closed webhooks, as it would register
// them (its manifests' static ones and those it registers once ready, at
// their enforced failure policies), and every other fail-closed webhook of
// the cluster. The module's configurations already in the cluster are
// replaced by the plan's.
func clusterDeadlocks(ctx context.Context, cfg *rest.Config, m *spec.Module) (cycles []deadlock.Cycle, read int, missing []string, err error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, 0, nil, err
	}
	hooks, missing, err := deadlock.ReadHooks(ctx, cs)
	if err != nil {
		return nil, 0, nil, fmt.Errorf("--cluster: read the cluster's webhook configurations: %w", err)
	}
	var all []deadlock.Hook
	for _, h := range hooks {
		if h.Module != m.Name {
			all = append(all, h)
		}
	}
	own, err := plannedHooks(ctx, cfg, cs, m)
	if err != nil {
		return nil, 0, nil, err
	}
	return deadlock.Between(m.Name, append(all, own...)), len(all), missing, nil
}

// plannedHooks are the module's webhooks once it enforces, served by its
// admission pods as the manifests render them.
func plannedHooks(ctx context.Context, cfg *rest.Config, cs kubernetes.Interface, m *spec.Module) ([]deadlock.Hook, error) {
	objs, err := manifests.Render(m, manifests.Options{Image: "plan.invalid/" + m.Name})
	if err != nil {
		return nil, err
	}
	be := &deadlock.Backend{Service: m.Namespace + "/" + m.Name, Namespace: m.Namespace}
	if ns, err := cs.CoreV1().Namespaces().Get(ctx, m.Namespace, metav1.GetOptions{}); err == nil {
		be.NamespaceLabels = ns.Labels
	}
	var static []deadlock.Hook
	for _, o := range objs {
		switch o := o.(type) {
		case *appsv1.Deployment:
			if o.Name == m.Name {
				be.PodLabels = o.Spec.Template.Labels
			}
		case *admissionregistrationv1.MutatingWebhookConfiguration:
			static = append(static, deadlock.HooksOf(o, nil, m.Name, func(*admissionregistrationv1.ServiceReference) *deadlock.Backend { return be })...)
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			static = append(static, deadlock.HooksOf(nil, o, m.Name, func(*admissionregistrationv1.ServiceReference) *deadlock.Backend { return be })...)
		}
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, hc)
	if err != nil {
		return nil, err
	}
	mut, val, err := manifests.Enforced(m, mapper)
	if err != nil {
		return nil, fmt.Errorf("--cluster: the module's webhooks: %w", err)
	}
	return append(static, deadlock.HooksOf(mut, val, m.Name, func(*admissionregistrationv1.ServiceReference) *deadlock.Backend { return be })...), nil
}

// writeClusterDeadlocks prints the analysis across the cluster's webhooks and
// returns ErrDeadlock when it found any.
func writeClusterDeadlocks(out io.Writer, cycles []deadlock.Cycle, read int, missing []string) error {
	for _, m := range missing {
		fmt.Fprintf(out, "\nmissing right: %s\n", m)
	}
	if len(cycles) == 0 {
		fmt.Fprintf(out, "\ndeadlocks with the cluster's other webhooks (%d read): none found\n", read)
		return nil
	}
	fmt.Fprintf(out, "\ndeadlocks with the cluster's other webhooks (%d read): %d found; after both are down, neither comes back:\n", read, len(cycles))
	for i, c := range cycles {
		fmt.Fprintf(out, "  %d. %s\n     break it: %s\n", i+1, c.String(), c.Break)
	}
	return fmt.Errorf("%w: %d cycle(s) with the cluster's webhooks, printed above", ErrDeadlock, len(cycles))
}

// writeServed says which version of each kind the module writes the
// cluster serves; a declared feature it cannot serve is the error, as the
// admission role would exit with it.
func writeServed(ctx context.Context, out io.Writer, cfg *rest.Config, m *spec.Module) error {
	cluster, err := served.DiscoverConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("--cluster: %w", err)
	}
	fmt.Fprintf(out, "\ncluster: Kubernetes %s\n", cluster.GitVersion)
	for _, k := range served.Kinds {
		v := cluster.APIVersion(k)
		switch {
		case v == "":
			v = "not served"
		case !cluster.Default(k):
			v += " (enabled by a feature gate)"
		}
		fmt.Fprintf(out, "  %s: %s\n", k.Name, v)
	}
	if err := registration.Unservable(m, cluster); err != nil {
		return fmt.Errorf("the cluster cannot serve what module %s declares; its admission role would exit at start:\n%w", m.Name, err)
	}
	return nil
}
