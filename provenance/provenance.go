// Package provenance says who created a Namespace, as a vigil module's
// install records it (vigil.NamespaceProvenance): a MutatingAdmissionPolicy
// stamps CreatedBy and CreatedByGroups on every Namespace at its CREATE,
// over whatever the creator wrote, and a ValidatingAdmissionPolicy refuses
// changing or removing them afterwards to everyone but the identities the
// module allowed. Both are evaluated by the API server itself, so the record
// holds while the module is down.
//
// A Namespace that existed before the policies were installed carries no
// stamp: its creator is unknown, and only its creationTimestamp can vouch for
// it. So a decision such as "an Exemption written for namespace monitoring
// applies" asks Trusted: was the namespace created by one of the trusted
// identities, or did it exist before the Exemption was written — before
// anyone could have created it to claim the Exemption.
package provenance

import (
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The annotations of the stamp.
const (
	// CreatedBy is the username of the Namespace's creator.
	CreatedBy = "vigil.dev/created-by"
	// CreatedByGroups are the creator's groups, joined by commas.
	CreatedByGroups = "vigil.dev/created-by-groups"
)

// GroupPrefix marks a group among identities, as in group:system:masters;
// an identity without it is a username (a ServiceAccount is
// system:serviceaccount:<namespace>:<name>).
const GroupPrefix = "group:"

// Origin is what a Namespace says of its creation.
type Origin struct {
	// Namespace is the namespace's name.
	Namespace string
	// Stamped is whether the namespace carries the stamp: false for one
	// created before the module's install.
	Stamped bool
	// Creator is the creator's username, and Groups its groups, when
	// Stamped.
	Creator string
	Groups  []string
	// Created is the namespace's creationTimestamp (whole seconds).
	Created time.Time
}

// Of reads the origin of a Namespace from its metadata.
func Of(ns metav1.Object) Origin {
	o := Origin{Namespace: ns.GetName(), Created: ns.GetCreationTimestamp().Time}
	a := ns.GetAnnotations()
	if by, ok := a[CreatedBy]; ok {
		o.Stamped, o.Creator = true, by
		if g := a[CreatedByGroups]; g != "" {
			o.Groups = strings.Split(g, ",")
		}
	}
	return o
}

// CreatedByAnyOf reports whether the namespace was created by one of the
// identities: usernames, or groups prefixed "group:". An unstamped namespace
// was created by no one known.
func (o Origin) CreatedByAnyOf(identities ...string) bool {
	if !o.Stamped {
		return false
	}
	for _, id := range identities {
		if g, ok := strings.CutPrefix(id, GroupPrefix); ok {
			if slices.Contains(o.Groups, g) {
				return true
			}
		} else if id == o.Creator {
			return true
		}
	}
	return false
}

// ExistedBefore reports whether the namespace was created strictly before t.
// creationTimestamp has whole seconds: a namespace created in t's second
// did not exist before it.
func (o Origin) ExistedBefore(t time.Time) bool {
	return !o.Created.IsZero() && o.Created.Before(t.Truncate(time.Second))
}

// Trusted reports whether the namespace was created by one of the
// identities, or existed before t; the reason says which, or why neither,
// in words for a denial.
func (o Origin) Trusted(before time.Time, identities ...string) (bool, string) {
	switch {
	case o.CreatedByAnyOf(identities...):
		return true, "namespace " + o.Namespace + " was created by " + o.Creator + ", a trusted identity"
	case o.ExistedBefore(before):
		return true, "namespace " + o.Namespace + " existed before " + before.UTC().Format(time.RFC3339)
	case o.Stamped:
		return false, "namespace " + o.Namespace + " was created at " + o.Created.UTC().Format(time.RFC3339) + " by " + o.Creator + ", none of " + strings.Join(identities, ", ") + ", and not before " + before.UTC().Format(time.RFC3339)
	default:
		return false, "namespace " + o.Namespace + " carries no record of its creator and was created at " + o.Created.UTC().Format(time.RFC3339) + ", not before " + before.UTC().Format(time.RFC3339)
	}
}
