package define

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/definition/spec"
)

// TemplateMode is what a Pod validation's denial of a workload's pod
// template does to the workload's request: see PodTemplates.
type TemplateMode string

const (
	// TemplatesWarn admits the workload with the denial as a warning.
	TemplatesWarn TemplateMode = "Warn"
	// TemplatesDeny refuses the workload with the denial.
	TemplatesDeny TemplateMode = "Deny"
)

// workload is a kind whose objects carry a pod template.
type workload struct {
	gvk      schema.GroupVersionKind
	proto    client.Object
	template func(client.Object) *corev1.PodTemplateSpec
}

// Workloads are the kinds whose pod templates PodTemplates judges, in this
// order.
var workloads = []workload{
	{appsv1.SchemeGroupVersion.WithKind("Deployment"), &appsv1.Deployment{}, func(o client.Object) *corev1.PodTemplateSpec { return &o.(*appsv1.Deployment).Spec.Template }},
	{appsv1.SchemeGroupVersion.WithKind("ReplicaSet"), &appsv1.ReplicaSet{}, func(o client.Object) *corev1.PodTemplateSpec { return &o.(*appsv1.ReplicaSet).Spec.Template }},
	{appsv1.SchemeGroupVersion.WithKind("StatefulSet"), &appsv1.StatefulSet{}, func(o client.Object) *corev1.PodTemplateSpec { return &o.(*appsv1.StatefulSet).Spec.Template }},
	{appsv1.SchemeGroupVersion.WithKind("DaemonSet"), &appsv1.DaemonSet{}, func(o client.Object) *corev1.PodTemplateSpec { return &o.(*appsv1.DaemonSet).Spec.Template }},
	{batchv1.SchemeGroupVersion.WithKind("Job"), &batchv1.Job{}, func(o client.Object) *corev1.PodTemplateSpec { return &o.(*batchv1.Job).Spec.Template }},
	{batchv1.SchemeGroupVersion.WithKind("CronJob"), &batchv1.CronJob{}, func(o client.Object) *corev1.PodTemplateSpec {
		return &o.(*batchv1.CronJob).Spec.JobTemplate.Spec.Template
	}},
}

var podGVK = corev1.SchemeGroupVersion.WithKind("Pod")

// TemplateModeOf is the one mode PodTemplates was given, TemplatesWarn when
// none; more than one is a mode SetPodTemplates refuses, naming them.
func TemplateModeOf[M ~string](modes []M) TemplateMode {
	switch len(modes) {
	case 0:
		return TemplatesWarn
	case 1:
		return TemplateMode(modes[0])
	}
	return TemplateMode(fmt.Sprint(modes))
}

// SetPodTemplates makes a Pod validation judge the pod templates of the
// workload kinds too, with mode.
func (b *Binding) SetPodTemplates(site string, mode TemplateMode) {
	switch {
	case b.GVK != podGVK || b.Subresource != "":
		b.m.Recordf(site, "When(%s).PodTemplates: pod templates are judged by a binding on Pods (When(c, &corev1.Pod{})), not on %s", b.GVK.Kind, b.GVK.Kind)
	case mode != TemplatesWarn && mode != TemplatesDeny:
		b.m.Recordf(site, "PodTemplates(%q): expected vigil.TemplatesWarn or vigil.TemplatesDeny", mode)
	default:
		b.templates, b.templatesSite = mode, site
	}
}

// templateBindings are the bindings that judge the workloads' pod templates
// with pod, a Pod validation, as PodTemplates describes: one per workload
// kind, on CREATE and UPDATE, each named <pod's name>-<kind>-template.
func (b *Binding) templateBindings(pod spec.Binding) []spec.Binding {
	if !slices.Contains(pod.Operations, admissionv1.Create) {
		b.m.Recordf(b.templatesSite, "When(Pod).PodTemplates: the binding judges Pods on %v, and a workload's template becomes Pods by CREATE: add IsCreated", pod.Operations)
		return nil
	}
	out := make([]spec.Binding, 0, len(workloads))
	for _, w := range workloads {
		t := pod
		t.GVK, t.Parent, t.Subresource = w.gvk, schema.GroupVersionKind{}, ""
		t.New, t.Type = spec.NewObjectFunc(w.proto, w.gvk), reflect.TypeOf(w.proto)
		t.Operations = []admissionv1.Operation{admissionv1.Create, admissionv1.Update}
		t.Name = fmt.Sprintf("%s-%s-template", pod.Name, strings.ToLower(w.gvk.Kind))
		t.Validate = judgeTemplate(w, pod.Validate, b.templates)
		out = append(out, t)
	}
	return out
}

// judgeTemplate runs validate, a Pod validation, on the pod a workload's
// template makes: a Pod named after the workload, in its namespace, with
// the template's labels, annotations and spec, as a CREATE. An UPDATE
// that leaves the template as it was (a scale, a status) is not judged
// again: it makes no new pods.
func judgeTemplate(w workload, validate func(context.Context, client.Object, client.Object, *spec.Call) (admission.Verdict, error), mode TemplateMode) func(context.Context, client.Object, client.Object, *spec.Call) (admission.Verdict, error) {
	return func(ctx context.Context, obj, old client.Object, call *spec.Call) (admission.Verdict, error) {
		tmpl := w.template(obj)
		if old != nil && equality.Semantic.DeepEqual(tmpl, w.template(old)) {
			return admission.Allow(), nil
		}
		pod := &corev1.Pod{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{
				Name: obj.GetName(), Namespace: obj.GetNamespace(),
				Labels: tmpl.Labels, Annotations: tmpl.Annotations,
			},
			Spec: *tmpl.Spec.DeepCopy(),
		}
		raw, err := json.Marshal(pod)
		if err != nil {
			return admission.Verdict{}, err
		}
		req := *call.Raw
		req.Kind = metav1.GroupVersionKind(podGVK)
		req.RequestKind = &req.Kind
		req.Resource = metav1.GroupVersionResource{Version: "v1", Resource: "pods"}
		req.RequestResource = &req.Resource
		req.SubResource, req.Operation = "", admissionv1.Create
		req.Object.Raw, req.Object.Object = raw, nil
		req.OldObject.Raw, req.OldObject.Object = nil, nil
		v, err := validate(ctx, pod, nil, &spec.Call{Raw: &req, Store: call.Store})
		if err != nil || v.Allowed() {
			return v, err
		}
		what := fmt.Sprintf("%s %s: its pod template", w.gvk.Kind, obj.GetName())
		if mode == TemplatesDeny {
			return admission.DenyCode(v.Code(), what+": "+v.Message()).WithWarnings(v.Warnings()...), nil
		}
		return admission.Warn(append(v.Warnings(), what+" makes Pods that would be denied: "+v.Message())...), nil
	}
}
