package admit

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/definition/define"
	"github.com/vigilkit/vigil/internal/definition/spec"
)

// MutateBinding is define.MutateBinding, as the engine's tests declare their
// bindings.
func MutateBinding[T client.Object](gvk schema.GroupVersionKind, proto T, fn func(ctx context.Context, req *admission.Request[T]) error) spec.Binding {
	return define.MutateBinding(gvk, proto, fn)
}

// ValidateBinding is define.ValidateBinding, as the engine's tests declare
// their bindings.
func ValidateBinding[T client.Object](gvk schema.GroupVersionKind, proto T, fn func(ctx context.Context, req *admission.Request[T]) admission.Verdict) spec.Binding {
	return define.ValidateBinding(gvk, proto, fn)
}
