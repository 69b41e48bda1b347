package vigil

import (
	"context"
	"slices"

	"github.com/vigilkit/vigil/internal/define"
	"github.com/vigilkit/vigil/internal/spec"
	"github.com/vigilkit/vigil/provenance"
)

// TrustedNS is a namespace whose contents the module trusts, declared with
// TrustedNamespace.
type TrustedNS struct{ t spec.TrustedNamespace }

// TrustedNamespace declares a namespace whose contents the module trusts: the
// manifests create it, labelled as the module's, with a
// ValidatingAdmissionPolicy that lets only the allowed (usernames, "group:"
// groups; group:system:masters by default, plus the chart's trusted.allowed)
// create, delete or relabel it.
func TrustedNamespace(m *Module, name string, allowed ...string) *TrustedNS {
	t := spec.TrustedNamespace{Name: name, Allowed: slices.Clone(allowed), Site: define.Caller()}
	m.d.AddTrustedNamespace(t)
	if len(t.Allowed) == 0 {
		t.Allowed = spec.DefaultTrusted
	}
	return &TrustedNS{t: t}
}

// Name is the namespace's name.
func (t *TrustedNS) Name() string { return t.t.Name }

// Allowed are the identities that may create, delete and relabel the
// namespace, as declared (group:system:masters by default).
func (t *TrustedNS) Allowed() []string { return slices.Clone(t.t.Allowed) }

// Provenance is the module's record of who created each Namespace, declared
// with NamespaceProvenance.
type Provenance struct{ allowed []string }

// NamespaceProvenance makes the install record who creates each Namespace: a
// MutatingAdmissionPolicy (Kubernetes 1.36+) stamps provenance.CreatedBy and
// provenance.CreatedByGroups on every CREATE, and a ValidatingAdmissionPolicy
// lets only the allowed (as for TrustedNamespace) change them. Both are the API
// server's own and fail closed. The module's pods may get Namespaces.
func NamespaceProvenance(m *Module, allowed ...string) *Provenance {
	return &Provenance{allowed: m.d.AddProvenance(define.Caller(), allowed)}
}

// Origin reads who created the namespace, from the API server itself (not a
// cache), so a decision on it is as fresh as the request: call it only on
// the path that needs it. It works in the functions vigil calls (see
// ClientFrom).
func (p *Provenance) Origin(ctx context.Context, namespace string) (provenance.Origin, error) {
	return define.Origin(ctx, ClientFrom(ctx), namespace)
}

// Allowed are the identities that may change or remove a namespace's
// record, as declared (group:system:masters by default).
func (p *Provenance) Allowed() []string { return slices.Clone(p.allowed) }
