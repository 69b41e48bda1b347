package vigil

import (
	"context"
	"slices"

	"github.com/vigilkit/vigil/internal/definition/define"
	"github.com/vigilkit/vigil/internal/definition/spec"
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
	return &TrustedNS{t: m.d.AddTrustedNamespace(t)}
}

// Name is the namespace's name.
func (t *TrustedNS) Name() string { return t.t.Name }

// Allowed are the identities that may create, delete and relabel the
// namespace, as declared (group:system:masters by default).
func (t *TrustedNS) Allowed() []string { return slices.Clone(t.t.Allowed) }

// Provenance is the module's record of who created each Namespace, declared
// with NamespaceProvenance.
type Provenance struct {
	module  string
	allowed []string
}

// NamespaceProvenance makes the install record who creates each Namespace: a
// MutatingAdmissionPolicy (Kubernetes 1.36+) stamps provenance.CreatedBy and
// provenance.CreatedByGroups on every CREATE, and a ValidatingAdmissionPolicy
// lets only the allowed (as for TrustedNamespace) change them, or vouch for a
// namespace with provenance.VouchedUnder. Both are the API server's own and
// fail closed. The module's pods may get Namespaces, and the stamp's policy.
func NamespaceProvenance(m *Module, allowed ...string) *Provenance {
	return &Provenance{module: m.d.Name, allowed: m.d.AddProvenance(define.Caller(), allowed)}
}

// Origin reads who created the namespace, and since when the stamp's policy
// is in force (provenance.Of), from the API server itself (not a cache), so
// a decision on it is as fresh as the request: call it only on the path
// that needs it. It works in the functions vigil calls (see ClientFrom); in
// a case run in process, which has no API server, it reads the case's
// objects.
func (p *Provenance) Origin(ctx context.Context, namespace string) (provenance.Origin, error) {
	return define.OriginOf(ctx, p.module, namespace)
}

// Allowed are the identities that may change or remove a namespace's
// record, or vouch for a namespace, as declared (group:system:masters by
// default).
func (p *Provenance) Allowed() []string { return slices.Clone(p.allowed) }

// Claims reports whether namespace may claim what was written for it — an
// Exemption naming it, say: whether one of creators created it, or an
// allowed identity vouched for it (provenance.Origin.Trusted). Its age is no
// evidence. The reason says why, or why not, in words for a denial or a log
// line; a namespace whose record cannot be read claims nothing.
func (p *Provenance) Claims(ctx context.Context, namespace string, creators ...string) (bool, string) {
	return define.Claims(namespace, func() (provenance.Origin, error) { return p.Origin(ctx, namespace) }, creators...)
}

// Claimable splits items into those namespace may claim and those it may
// not: an item for which names reports true is kept only if
// p.Claims(namespace, creators...), whose reason comes back; the others are
// kept without asking the API server. It is how a module honours what an
// admin wrote for a namespace — an Exemption — only in a namespace a
// trusted identity created, so that a tenant who creates the namespace,
// before or after it was written, claims nothing.
func Claimable[T any](ctx context.Context, p *Provenance, namespace string, items []T, names func(T) bool, creators ...string) (kept, dropped []T, reason string) {
	return define.Claimable(items, names, func() (bool, string) { return p.Claims(ctx, namespace, creators...) })
}
