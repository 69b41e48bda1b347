package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vigilkit/vigil"
)

// trust is what the module trusts an Exemption by: the namespace it must be
// written in (created and guarded by the install), and who created the
// namespace it exempts pods of.
//
// An Exemption written for a namespace must not be claimable by whoever
// creates that namespace — before the Exemption is written, or after (the
// sample's monitoring, installed before the monitoring stack). So an
// Exemption applies to a namespace only if the namespace was created by a
// trusted identity (the exemptions namespace's allowed, group
// system:masters by default, and CLUSTERCONFIG_NAMESPACE_CREATORS), or an
// allowed identity vouched for it (provenance.VouchedUnder: for a namespace
// created before the install, whose creator is unknown). How old the
// namespace is makes no difference. Who created a namespace is the
// framework's record (vigil.NamespaceProvenance, vigil.Claimable), read from
// the API server for each privileged Pod only.
type trust struct {
	exemptions *vigil.TrustedNS
	provenance *vigil.Provenance
	// creators are the identities whose namespaces any Exemption may name.
	creators []string
}

// declareTrust declares the exemptions namespace and the namespace
// provenance. CLUSTERCONFIG_NAMESPACE_CREATORS adds, comma-separated,
// identities (usernames, group:<name>) trusted to create namespaces that
// Exemptions name — a GitOps controller's ServiceAccount, say.
func declareTrust(m *vigil.Module, s settings) *trust {
	t := &trust{
		exemptions: vigil.TrustedNamespace(m, s.exemptionsNamespace),
		provenance: vigil.NamespaceProvenance(m),
	}
	t.creators = t.exemptions.Allowed()
	for _, c := range strings.Split(s.creators, ",") {
		if c = strings.TrimSpace(c); c != "" {
			t.creators = append(t.creators, c)
		}
	}
	return t
}

// claimable drops from exemptions those that namespace may not claim, and
// says why each was dropped (with a leading "; ", for a denial), or "".
// Only Exemptions with an entry for namespace need the namespace's record:
// without one the API server is not asked. Each dropped Exemption is also
// logged, as an Exemption naming a namespace an untrusted identity created.
func (t *trust) claimable(ctx context.Context, exemptions []*unstructured.Unstructured, namespace string) ([]*unstructured.Unstructured, string) {
	kept, dropped, reason := vigil.Claimable(ctx, t.provenance, namespace, exemptions,
		func(ex *unstructured.Unstructured) bool { return namesNamespace(ex, namespace) }, t.creators...)
	var why []string
	for _, ex := range dropped {
		why = append(why, fmt.Sprintf("Exemption %s/%s does not apply: %s (an Exemption applies to a namespace created by %s, or vouched for)",
			ex.GetNamespace(), ex.GetName(), reason, strings.Join(t.creators, ", ")))
		logr.FromContextOrDiscard(ctx).Info("an Exemption names a namespace that no trusted identity created: it does not apply",
			"exemption", ex.GetNamespace()+"/"+ex.GetName(), "namespace", namespace, "reason", reason)
	}
	if len(why) == 0 {
		return kept, ""
	}
	return kept, "; " + strings.Join(why, "; ")
}

// namesNamespace reports whether one of the Exemption's entries names the
// namespace.
func namesNamespace(ex *unstructured.Unstructured, namespace string) bool {
	entries, _, _ := unstructured.NestedSlice(ex.Object, "spec", "exemptions")
	for _, e := range entries {
		if entry, ok := e.(map[string]any); ok {
			if ns, _, _ := unstructured.NestedString(entry, "matcher", "namespace"); ns == namespace {
				return true
			}
		}
	}
	return false
}
