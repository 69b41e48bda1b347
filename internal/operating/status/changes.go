package status

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	v1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// Changes reports, on the channel it returns, each change the API server
// announces to what a report is read from: the modules' Deployments (a
// role's replicas, its refused creates) and pods, the Events on those pods
// (gate progress, drifts repaired) and the cluster's webhook configurations
// (the registration state and the other webhooks). A burst of changes arrives as
// one signal. What no watch announces — a starting pod's log lines, the
// audit's PolicyReports — is for the caller to read again on a timer.
//
// Each kind is watched as far as the reader's rights go: a list or watch
// refused is retried with the reflector's back-off, silently, since Collect
// names the missing right. The watches end with ctx.
func Changes(ctx context.Context, c Clients, o Options) <-chan struct{} {
	ch := make(chan struct{}, 1)
	signal := func() {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { signal() },
		UpdateFunc: func(any, any) { signal() },
		DeleteFunc: func(any) { signal() },
	}
	quiet := func(context.Context, *cache.Reflector, error) {}

	sel := vigilSelector + ",app.kubernetes.io/component in (admission,watcher)"
	if o.Module != "" {
		sel += ",app.kubernetes.io/part-of=" + o.Module
	}
	modules := informers.NewSharedInformerFactoryWithOptions(c.Kube, 0, informers.WithNamespace(o.Namespace),
		informers.WithTweakListOptions(func(lo *v1.ListOptions) { lo.LabelSelector = sel }))
	// Events on pods only, and of those only the ones on a module's pod
	// count: a busy cluster's other Events draw nothing.
	namespace := informers.NewSharedInformerFactoryWithOptions(c.Kube, 0, informers.WithNamespace(o.Namespace),
		informers.WithTweakListOptions(func(lo *v1.ListOptions) { lo.FieldSelector = "involvedObject.kind=Pod" }))
	cluster := informers.NewSharedInformerFactory(c.Kube, 0)
	pods := modules.Core().V1().Pods().Informer()
	events := namespace.Core().V1().Events().Informer()
	for _, inf := range []cache.SharedIndexInformer{
		modules.Apps().V1().Deployments().Informer(),
		pods,
		cluster.Admissionregistration().V1().MutatingWebhookConfigurations().Informer(),
		cluster.Admissionregistration().V1().ValidatingWebhookConfigurations().Informer(),
	} {
		_ = inf.SetWatchErrorHandlerWithContext(quiet)
		_, _ = inf.AddEventHandler(handler)
	}
	onModulePod := func(obj any) {
		e, ok := obj.(*corev1.Event)
		if !ok {
			return
		}
		if _, known, _ := pods.GetStore().GetByKey(e.InvolvedObject.Namespace + "/" + e.InvolvedObject.Name); known {
			signal()
		}
	}
	_ = events.SetWatchErrorHandlerWithContext(quiet)
	// Only whose pod an Event is on is kept: every namespace's pod Events
	// are cached when no namespace is given.
	_ = events.SetTransform(func(obj any) (any, error) {
		if e, ok := obj.(*corev1.Event); ok {
			return &corev1.Event{ObjectMeta: v1.ObjectMeta{Name: e.Name, Namespace: e.Namespace, ResourceVersion: e.ResourceVersion},
				InvolvedObject: corev1.ObjectReference{Namespace: e.InvolvedObject.Namespace, Name: e.InvolvedObject.Name}}, nil
		}
		return obj, nil
	})
	_, _ = events.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    onModulePod,
		UpdateFunc: func(_, obj any) { onModulePod(obj) },
	})
	for _, f := range []informers.SharedInformerFactory{modules, namespace, cluster} {
		f.Start(ctx.Done())
	}
	go func() {
		<-ctx.Done()
		for _, f := range []informers.SharedInformerFactory{modules, namespace, cluster} {
			f.Shutdown()
		}
	}()
	return ch
}
