package admissionrole

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/vigilkit/vigil/internal/admit"
	"github.com/vigilkit/vigil/internal/spec"

	"github.com/vigilkit/vigil/internal/events"
)

// audit runs the validations registered when ready over the objects that
// exist, as if they were created now, and reports each denial as a Warning
// Event on the object, a log line and a metric: they may have been admitted
// while the webhooks were not registered. Nothing is denied or changed.
func audit(ctx context.Context, cfg *rest.Config, log logr.Logger, m *spec.Module, h *admit.Handler, metrics *admit.Metrics) error {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, hc)
	if err != nil {
		return err
	}
	kinds := map[schema.GroupVersionKind][]string{}
	for _, b := range m.Bindings {
		// A subresource's object (a Scale) is no object to list: its parent
		// is audited by the parent's own bindings.
		if b.Action == spec.Validate && !b.FailClosed && b.Subresource == "" {
			if _, seen := kinds[b.GVK]; !seen || len(b.Namespaces) == 0 {
				kinds[b.GVK] = b.Namespaces
			}
		}
	}
	violations := 0
	for gvk, namespaces := range kinds {
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("audit %s: %w", gvk, err)
		}
		if len(namespaces) == 0 {
			namespaces = []string{metav1.NamespaceAll}
		}
		for _, ns := range namespaces {
			list, err := dyn.Resource(mapping.Resource).Namespace(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return fmt.Errorf("audit %s in %q: %w", mapping.Resource.Resource, ns, err)
			}
			for i := range list.Items {
				obj := &list.Items[i]
				raw, err := obj.MarshalJSON()
				if err != nil {
					continue
				}
				msg := h.Audit(ctx, &admissionv1.AdmissionRequest{
					UID:       types.UID(fmt.Sprintf("audit-%s", obj.GetUID())),
					Kind:      metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
					Resource:  metav1.GroupVersionResource{Group: mapping.Resource.Group, Version: mapping.Resource.Version, Resource: mapping.Resource.Resource},
					Namespace: obj.GetNamespace(), Name: obj.GetName(), Operation: admissionv1.Create,
					Object: runtime.RawExtension{Raw: raw},
				})
				if msg == "" {
					continue
				}
				violations++
				metrics.AuditViolation()
				events.Info(log, events.AuditViolation, "audit: an existing object violates a validation; it may have been admitted before the webhooks were registered",
					"kind", gvk.Kind, "namespace", obj.GetNamespace(), "name", obj.GetName(), "violation", msg)
				recordAuditEvent(ctx, cs, m.Name, obj, msg)
			}
		}
	}
	events.Info(log, events.AuditDone, "audit done", "violations", violations)
	return nil
}

func recordAuditEvent(ctx context.Context, cs kubernetes.Interface, module string, obj *unstructured.Unstructured, msg string) {
	ns := obj.GetNamespace()
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	now := metav1.Now()
	_, _ = cs.CoreV1().Events(ns).Create(ctx, &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: obj.GetName() + ".", Namespace: ns},
		InvolvedObject: corev1.ObjectReference{
			APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID(),
		},
		Reason:  "AuditViolation",
		Message: fmt.Sprintf("vigil module %s: this object violates a validation and may have been admitted before the module's webhooks were registered: %s", module, msg),
		Type:    corev1.EventTypeWarning, Source: corev1.EventSource{Component: module + "-audit"},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
	}, metav1.CreateOptions{})
}
