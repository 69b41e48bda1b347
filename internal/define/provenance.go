package define

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/internal/spec"
	"github.com/vigilkit/vigil/provenance"
)

// AddProvenance records NamespaceProvenance, declared at site, with the
// rule that lets the module's pods get Namespaces for Origin; it returns the
// identities allowed, group:system:masters when none is named.
func (m *Module) AddProvenance(site string, allowed []string) []string {
	m.SetProvenance(spec.Provenance{Allowed: slices.Clone(allowed), Site: site})
	rules, err := Rules("Provenance.Origin reads a Namespace's creator", site,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get"}}, nil)
	m.Check(site, err)
	m.AddRules(rules...)
	if len(allowed) == 0 {
		return slices.Clone(spec.DefaultTrusted)
	}
	return slices.Clone(allowed)
}

// Origin reads who created the namespace through c, the API server itself.
func Origin(ctx context.Context, c client.Client, namespace string) (provenance.Origin, error) {
	if c == nil {
		return provenance.Origin{}, errors.New("namespace provenance: no client of the API server here: call Origin from a handler vigil calls")
	}
	ns := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKey{Name: namespace}, ns); err != nil {
		return provenance.Origin{}, fmt.Errorf("get namespace %q for its creator: %w", namespace, err)
	}
	return provenance.Of(ns), nil
}
