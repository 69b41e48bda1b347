package provenance

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The annotations of the stamp, and of a vouch.
const (
	// CreatedBy is the username of the Namespace's creator.
	CreatedBy = "vigil.dev/created-by"
	// CreatedByGroups are the creator's groups, as a JSON list of strings
	// (["devs","system:authenticated"]): a group's own commas, quotes and
	// backslashes cannot make it read as more than one group.
	CreatedByGroups = "vigil.dev/created-by-groups"
	// VouchedUnder marks a Namespace whose creator is unknown — created
	// before the stamp's policy was in force — as vouched for by one of the
	// identities the module allowed: its value is the UID of the stamp's
	// MutatingAdmissionPolicy, which no one can know before it exists, and
	// only the allowed may write it afterwards.
	VouchedUnder = "vigil.dev/vouched-under"
)

// GroupPrefix marks a group among identities, as in group:system:masters;
// an identity without it is a username (a ServiceAccount is
// system:serviceaccount:<namespace>:<name>).
const GroupPrefix = "group:"

// Settle is how long after its policy's creation a stamp is believed: the
// API server takes the new policy in within a moment, and a Namespace
// created before it did carries whatever its creator wrote.
const Settle = 5 * time.Second

// Stamp is the stamp's MutatingAdmissionPolicy as installed: stamps are
// believed on Namespaces created Settle after Since, and a vouch only when
// it names UID. The zero Stamp, no policy installed, believes nothing.
type Stamp struct {
	UID   string
	Since time.Time
}

// StampOf is the Stamp of the stamp's MutatingAdmissionPolicy, read from
// the API server.
func StampOf(policy metav1.Object) Stamp {
	return Stamp{UID: string(policy.GetUID()), Since: policy.GetCreationTimestamp().Time}
}

// Origin is what a Namespace says of its creation, and how much of it is
// believed.
type Origin struct {
	// Namespace is the namespace's name.
	Namespace string
	// Stamped is whether the namespace carries a creator's stamp, believed
	// or not.
	Stamped bool
	// Known is whether the namespace's creator is known: it was stamped
	// while the stamp's policy was in force, or an allowed identity vouched
	// for it (Vouched). Otherwise Unknown says why not.
	Known, Vouched bool
	Unknown        string
	// Creator is the creator's username, and Groups its groups, as stamped
	// (believed only when Known and not Vouched).
	Creator string
	Groups  []string
	// Created is the namespace's creationTimestamp (whole seconds).
	Created time.Time
}

// Of reads the origin of a Namespace from its metadata, believing its stamp
// only as far as the stamp's policy in force vouches for it: a Namespace
// created before the policy was (or within Settle of its creation, or while
// none was installed) has an unknown creator, whatever it says, unless it
// carries a vouch under the policy.
func Of(ns metav1.Object, in Stamp) Origin {
	o := Origin{Namespace: ns.GetName(), Created: ns.GetCreationTimestamp().Time}
	a := ns.GetAnnotations()
	by, stamped := a[CreatedBy]
	groups, err := DecodeGroups(a[CreatedByGroups])
	if stamped {
		o.Stamped, o.Creator, o.Groups = true, by, groups
	}
	switch {
	case in.UID == "":
		o.Unknown = "no stamp of namespace creators is installed (MutatingAdmissionPolicy missing)"
	case a[VouchedUnder] == in.UID:
		o.Known, o.Vouched = true, true
	case !o.Created.After(in.Since.Add(Settle)):
		o.Unknown = fmt.Sprintf("it was created at %s, before the stamp of namespace creators was in force (%s): vouch for it with the annotation %s",
			o.Created.UTC().Format(time.RFC3339), in.Since.Add(Settle).UTC().Format(time.RFC3339), VouchedUnder)
	case !stamped:
		o.Unknown = "it carries no stamp of its creator"
	case err != nil:
		o.Unknown = "its creator's groups cannot be read: " + err.Error()
	default:
		o.Known = true
	}
	return o
}

// EncodeGroups is the CreatedByGroups of groups, as the stamp's policy
// writes it: a JSON list of strings.
func EncodeGroups(groups []string) string {
	if groups == nil {
		groups = []string{}
	}
	b, _ := json.Marshal(groups)
	return string(b)
}

// DecodeGroups reads a CreatedByGroups: a JSON list of strings. The stamp
// escapes only backslashes and quotes, so a control character in a group
// is taken as written. Anything else, such as the comma-joined list of
// earlier versions, cannot be read: which commas separated groups is
// unknown.
func DecodeGroups(v string) ([]string, error) {
	if v == "" {
		return nil, nil
	}
	var out []string
	err := json.Unmarshal([]byte(v), &out)
	if err != nil && strings.HasPrefix(v, "[") {
		// Raw control characters, which JSON refuses in a string and the
		// stamp writes as they are: escape them, and read again.
		var b strings.Builder
		for _, r := range v {
			if r < 0x20 {
				fmt.Fprintf(&b, `\u%04x`, r)
			} else {
				b.WriteRune(r)
			}
		}
		out = nil
		err = json.Unmarshal([]byte(b.String()), &out)
	}
	if err != nil {
		return nil, fmt.Errorf("annotation %s %q: expected a JSON list of strings (%v)", CreatedByGroups, v, err)
	}
	return out, nil
}

// CreatedByAnyOf reports whether the namespace's known creator is one of
// the identities: usernames, or groups prefixed "group:". A namespace whose
// creator is unknown, or only vouched for, was created by no one known.
func (o Origin) CreatedByAnyOf(identities ...string) bool {
	if !o.Known || o.Vouched {
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

// Trusted reports whether the namespace was created by one of the
// identities, or vouched for by an identity the module allowed; the reason
// says which, or why neither, in words for a denial or a log line. How old
// the namespace is makes no difference: a namespace a tenant created before
// an Exemption was written for it is still hers.
func (o Origin) Trusted(identities ...string) (bool, string) {
	switch {
	case o.Vouched:
		return true, "namespace " + o.Namespace + " is vouched for (annotation " + VouchedUnder + ")"
	case o.CreatedByAnyOf(identities...):
		return true, "namespace " + o.Namespace + " was created by " + o.Creator + ", a trusted identity"
	case o.Known:
		return false, "namespace " + o.Namespace + " was created by " + o.Creator + " (groups " + strings.Join(o.Groups, ", ") + "), none of " + strings.Join(identities, ", ")
	default:
		return false, "the creator of namespace " + o.Namespace + " is unknown: " + o.Unknown
	}
}
