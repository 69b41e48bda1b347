package main

import (
	"context"
	"strings"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vigilkit/vigil"
)

// trust is what an Exemption is trusted by. uds-policy-exemptions is the
// install's (vigil.TrustedNamespace): the manifests create it, and only
// group system:masters (and the chart's trusted.allowed) may create,
// delete or relabel it, so a tenant cannot take it before the install or
// after an admin deleted it. And an Exemption applies to the namespace its
// matcher names only if a trusted identity created that namespace — group
// system:masters and UDS_NAMESPACE_CREATORS — or an allowed identity
// vouched for it (vigil.NamespaceProvenance, vigil.Claimable): a tenant who
// creates the namespace an Exemption names, before or after it was
// written, claims nothing. UDS Core itself trusts every Exemption in
// uds-policy-exemptions for whatever namespace it names.
type trust struct {
	exemptions *vigil.TrustedNS
	provenance *vigil.Provenance
	// creators are the identities whose namespaces an Exemption may name.
	creators []string
}

// declareTrust declares the exemptions namespace and the namespace
// provenance. UDS_NAMESPACE_CREATORS adds, comma-separated, identities
// (usernames, group:<name>) trusted to create the namespaces Exemptions
// name: the identity UDS Core's packages are deployed as, say
// (system:serviceaccount:<namespace>:<name> for a ServiceAccount).
func declareTrust(m *vigil.Module) *trust {
	t := &trust{
		exemptions: vigil.TrustedNamespace(m, ExemptionsNamespace),
		provenance: vigil.NamespaceProvenance(m),
	}
	t.creators = t.exemptions.Allowed()
	for _, c := range strings.Split(vigil.Setting(m, "UDS_NAMESPACE_CREATORS", ""), ",") {
		if c = strings.TrimSpace(c); c != "" {
			t.creators = append(t.creators, c)
		}
	}
	return t
}

// claimable is found, Exemptions that name namespace, less those namespace
// may not claim; each of those is logged, naming the Exemption, the
// namespace and why (the denial keeps UDS Core's words).
func (t *trust) claimable(ctx context.Context, found []*unstructured.Unstructured, namespace string) []*unstructured.Unstructured {
	kept, dropped, reason := vigil.Claimable(ctx, t.provenance, namespace, found,
		func(*unstructured.Unstructured) bool { return true }, t.creators...)
	for _, ex := range dropped {
		logr.FromContextOrDiscard(ctx).Info("an Exemption names a namespace that no trusted identity created: it does not apply",
			"exemption", ex.GetNamespace()+"/"+ex.GetName(), "namespace", namespace, "reason", reason,
			"trusted", strings.Join(t.creators, ", "))
	}
	return kept
}
