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
