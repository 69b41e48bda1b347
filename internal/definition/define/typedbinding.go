package define

import (
	"context"
	"reflect"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/definition/spec"
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
