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

// TrustedNamespace declares a namespace whose contents the module trusts —
// the one namespace whose Exemptions count, say — so that no one else can
// take it: the module's manifests and chart create it, labelled as the
// module's, and ship a ValidatingAdmissionPolicy (failurePolicy Fail, held by
// the API server whether the module runs or not) that refuses creating and
// deleting it, and changing its labels or annotations, to everyone but the
// allowed: usernames (a ServiceAccount is
// system:serviceaccount:<namespace>:<name>) and groups prefixed "group:";
// group:system:masters when none is named. The chart's value
// trusted.allowed adds the identity that installs it, such as a CI
// ServiceAccount. Who may write in the namespace is RBAC's to say.
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

// NamespaceProvenance makes the module's install record who creates each
// Namespace, for decisions that must not trust a namespace someone created
// to claim what was written for it (an Exemption for namespace monitoring,
// installed before the monitoring stack): a MutatingAdmissionPolicy
// (admissionregistration.k8s.io/v1, Kubernetes 1.36 and later) stamps the
// annotations provenance.CreatedBy and provenance.CreatedByGroups with the
// creator's username and groups on every Namespace's CREATE, over whatever
// the creator wrote, and a ValidatingAdmissionPolicy refuses changing or
// removing them to everyone but the allowed (as for TrustedNamespace;
// group:system:masters by default). Both fail closed and are the API
// server's own, so the record holds while the module is down. The module's
// pods may get Namespaces, for Origin.
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
