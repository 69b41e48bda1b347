package main

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vigilkit/vigil"
)

// trust is what the module trusts an Exemption by: the namespace it must be
// written in (created and guarded by the install), and who created the
// namespace it exempts pods of.
//
// An Exemption written for a namespace that does not exist yet — the
// sample's monitoring, installed before the monitoring stack — must not be
// claimable by whoever creates that namespace first. So an Exemption applies
// to a namespace only if the namespace was created by a trusted identity
// (the exemptions namespace's allowed, group system:masters by default, and
// CLUSTERCONFIG_NAMESPACE_CREATORS), or existed before the Exemption was
// written (its creationTimestamp strictly before the Exemption's). Who
// created a namespace is the framework's record (vigil.NamespaceProvenance),
// read from the API server for each privileged Pod only.
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
// says why each was dropped (with a leading "; ", for a denial), or "". Only
// Exemptions with an entry for namespace need the namespace's record: the
// others pass untouched, and without one the API server is not asked.
func (t *trust) claimable(ctx context.Context, exemptions []*unstructured.Unstructured, namespace string) ([]*unstructured.Unstructured, string) {
	var naming []int
	for i, ex := range exemptions {
		if namesNamespace(ex, namespace) {
			naming = append(naming, i)
		}
	}
	if len(naming) == 0 {
		return exemptions, ""
	}
	origin, err := t.provenance.Origin(ctx, namespace)
	if err != nil {
		return without(exemptions, naming), fmt.Sprintf("; the Exemptions for namespace %q do not apply: who created it cannot be read: %v", namespace, err)
	}
	var drop []int
	var why []string
	for _, i := range naming {
		ex := exemptions[i]
		if ok, reason := origin.Trusted(ex.GetCreationTimestamp().Time, t.creators...); !ok {
			drop = append(drop, i)
			why = append(why, fmt.Sprintf("Exemption %s/%s does not apply: %s (an Exemption applies to a namespace created by %s, or that existed before it was written)",
				ex.GetNamespace(), ex.GetName(), reason, strings.Join(t.creators, ", ")))
		}
	}
	if len(drop) == 0 {
		return exemptions, ""
	}
	return without(exemptions, drop), "; " + strings.Join(why, "; ")
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

// without is list less the items at the indexes, which ascend.
func without(list []*unstructured.Unstructured, drop []int) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, 0, len(list)-len(drop))
	for i, it := range list {
		if len(drop) > 0 && drop[0] == i {
			drop = drop[1:]
			continue
		}
		out = append(out, it)
	}
	return out
}
