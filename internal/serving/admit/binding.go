package admit

import (
	"slices"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/vigilkit/vigil/internal/definition/spec"
)

// serves reports whether the request is of what the binding is for: its
// kind, resource or subresource, and operations. Filters and namespaces
// aside, this is what its webhook's rules send it.
func serves(b *spec.Binding, req *admissionv1.AdmissionRequest) bool {
	if req.Kind.Group != b.GVK.Group || req.Kind.Kind != b.GVK.Kind || req.Kind.Version != b.GVK.Version {
		return false
	}
	// A subresource's requests are the subresource's alone: a Pod binding
	// does not see pods/ephemeralcontainers unless it asked for them. The
	// status writes that change labels or annotations, which carry the
	// whole object, are also its resource's UPDATE bindings' (their webhook
	// is sent no other status write: see spec.Binding.StatusMetadata).
	if req.SubResource != b.Subresource && (req.SubResource != spec.StatusSubresource || !b.StatusMetadata()) {
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

// Serves reports whether a binding's webhook rules send it the request:
// its kind, resource or subresource, and operations (not its filters).
func Serves(b *spec.Binding, req *admissionv1.AdmissionRequest) bool { return serves(b, req) }
