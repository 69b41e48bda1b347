package admit

import (
	"context"
	"reflect"
	"slices"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/spec"
)

// MutateBinding makes a binding that runs fn on objects of proto's type.
func MutateBinding[T client.Object](gvk schema.GroupVersionKind, proto T, fn func(ctx context.Context, req *admission.Request[T]) error) spec.Binding {
	b := spec.Binding{GVK: gvk, Action: spec.Mutate, New: spec.NewObjectFunc(proto, gvk), Type: reflect.TypeOf(proto)}
	b.Mutate = func(ctx context.Context, obj, old client.Object, in *spec.Call) error {
		return fn(ctx, typed[T](obj, old, in))
	}
	return b
}

// ValidateBinding makes a binding that judges objects of proto's type with fn.
func ValidateBinding[T client.Object](gvk schema.GroupVersionKind, proto T, fn func(ctx context.Context, req *admission.Request[T]) admission.Verdict) spec.Binding {
	b := spec.Binding{GVK: gvk, Action: spec.Validate, New: spec.NewObjectFunc(proto, gvk), Type: reflect.TypeOf(proto)}
	b.Validate = func(ctx context.Context, obj, old client.Object, in *spec.Call) (admission.Verdict, error) {
		return fn(ctx, typed[T](obj, old, in)), nil
	}
	return b
}

func typed[T client.Object](obj, old client.Object, in *spec.Call) *admission.Request[T] {
	r := in.Raw
	req := &admission.Request[T]{
		Operation: r.Operation,
		UserInfo:  r.UserInfo,
		DryRun:    r.DryRun != nil && *r.DryRun,
		Namespace: r.Namespace,
		Name:      r.Name,
		Kind:      r.Kind,
		Store:     in.Store,
		Raw:       r,
	}
	if obj != nil {
		req.Object = obj.(T)
	}
	if old != nil {
		req.OldObject = old.(T)
	}
	return req
}

// serves reports whether the request is of what the binding is for: its
// kind, resource or subresource, and operations. Filters and namespaces
// aside, this is what its webhook's rules send it.
func serves(b *spec.Binding, req *admissionv1.AdmissionRequest) bool {
	if req.Kind.Group != b.GVK.Group || req.Kind.Kind != b.GVK.Kind || req.Kind.Version != b.GVK.Version {
		return false
	}
	// A subresource's requests are the subresource's alone: a Pod binding
	// does not see pods/ephemeralcontainers unless it asked for them.
	if req.SubResource != b.Subresource {
		return false
	}
	if !b.Parent.Empty() && (req.Resource.Group != b.Parent.Group || req.Resource.Resource+"/"+req.SubResource != b.Resource()) {
		return false
	}
	return len(b.Operations) == 0 || slices.Contains(b.Operations, req.Operation)
}

// matches reports whether the binding runs for this request.
func matches(b *spec.Binding, req *admissionv1.AdmissionRequest, meta func() spec.Meta) bool {
	if !serves(b, req) {
		return false
	}
	if len(b.Namespaces) > 0 && !slices.Contains(b.Namespaces, req.Namespace) {
		return false
	}
	if len(b.Filters) == 0 {
		return true
	}
	m := meta()
	for _, f := range b.Filters {
		if !f.Match(m) {
			return false
		}
	}
	return true
}
