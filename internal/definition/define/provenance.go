package define

import (
	"context"
	"errors"
	"fmt"
	"slices"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/runtime/callctx"
	"github.com/vigilkit/vigil/internal/runtime/served"
	"github.com/vigilkit/vigil/provenance"
)

// AddProvenance records NamespaceProvenance, declared at site, with the
// rules that let the module's pods get Namespaces and the stamp's
// MutatingAdmissionPolicy for Origin; it returns the identities allowed,
// group:system:masters when none is named.
func (m *Module) AddProvenance(site string, allowed []string) []string {
	m.SetProvenance(spec.Provenance{Allowed: slices.Clone(allowed), Site: site})
	rules, err := Rules("Provenance.Origin reads a Namespace's creator", site,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get"}}, nil)
	m.Check(site, err)
	m.AddRules(rules...)
	rules, err = Rules("Provenance.Origin reads since when the stamp of namespace creators is in force", site,
		rbacv1.PolicyRule{APIGroups: []string{admissionregistrationv1.GroupName}, Resources: []string{"mutatingadmissionpolicies"}, Verbs: []string{"get"},
			ResourceNames: []string{spec.ProvenanceStampName(m.Name)}}, nil)
	m.Check(site, err)
	m.AddRules(rules...)
	if len(allowed) == 0 {
		return slices.Clone(spec.DefaultTrusted)
	}
	return slices.Clone(allowed)
}

// Origin reads who created the namespace through c, the API server itself
// (or a case's objects, in process):
// the Namespace, and the module's stamp policy, since when stamps are
// believed. A stamp policy that is not installed believes no stamp.
func Origin(ctx context.Context, c client.Reader, module, namespace string) (provenance.Origin, error) {
	if c == nil {
		return provenance.Origin{}, errors.New("namespace provenance: no client of the API server here: call Origin from a handler vigil calls")
	}
	ns := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKey{Name: namespace}, ns); err != nil {
		return provenance.Origin{}, fmt.Errorf("get namespace %q for its creator: %w", namespace, err)
	}
	stamp := provenance.Stamp{}
	// The policy's metadata, in the first version of MutatingAdmissionPolicy
	// the cluster serves (v1 from 1.36; v1beta1 or v1alpha1 where enabled
	// before): one the client cannot map is not served.
	for _, v := range served.MutatingAdmissionPolicy.Versions {
		version := v.Name
		policy := &metav1.PartialObjectMetadata{}
		policy.SetGroupVersionKind(admissionregistrationv1.SchemeGroupVersion.WithKind("MutatingAdmissionPolicy").GroupKind().WithVersion(version))
		switch err := c.Get(ctx, client.ObjectKey{Name: spec.ProvenanceStampName(module)}, policy); {
		case err == nil:
			stamp = provenance.StampOf(policy)
		case meta.IsNoMatchError(err):
			continue
		case !apierrors.IsNotFound(err):
			return provenance.Origin{}, fmt.Errorf("get MutatingAdmissionPolicy %s (%s), since when namespace creators are stamped: %w", spec.ProvenanceStampName(module), version, err)
		}
		break
	}
	return provenance.Of(ns, stamp), nil
}

// OriginOf is Origin through what the handler of ctx reads the API server
// with (callctx.Reader): its client, or a case's objects in process.
func OriginOf(ctx context.Context, module, namespace string) (provenance.Origin, error) {
	return Origin(ctx, callctx.Reader(ctx), module, namespace)
}

// Claims reports whether one of creators created namespace, or an allowed
// identity vouched for it, by its origin, with the reason in words; a
// namespace whose record cannot be read claims nothing.
func Claims(namespace string, origin func() (provenance.Origin, error), creators ...string) (bool, string) {
	o, err := origin()
	if err != nil {
		return false, "who created namespace " + namespace + " cannot be read: " + err.Error()
	}
	return o.Trusted(creators...)
}

// Claimable splits items into those kept and those dropped: an item names
// reports true for is dropped unless claims does; claims is asked only when
// there is such an item, and its reason comes back.
func Claimable[T any](items []T, names func(T) bool, claims func() (bool, string)) (kept, dropped []T, reason string) {
	if !slices.ContainsFunc(items, names) {
		return items, nil, ""
	}
	ok, reason := claims()
	if ok {
		return items, nil, reason
	}
	kept = make([]T, 0, len(items))
	for _, it := range items {
		if names(it) {
			dropped = append(dropped, it)
		} else {
			kept = append(kept, it)
		}
	}
	return kept, dropped, reason
}
