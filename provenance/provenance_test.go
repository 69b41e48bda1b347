package provenance_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vigilkit/vigil/provenance"
)

// Origin.Trusted: created by one of the identities (a username, or a group
// of the creator's) or vouched for under the stamp in force; a stamp on a
// namespace created before the stamp's policy was (or within Settle of it),
// or with no policy installed, is not believed; age is no evidence.
func TestOriginTrusted(t *testing.T) {
	since := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	stamp := provenance.Stamp{UID: "policy-uid", Since: since}
	after := since.Add(provenance.Settle + time.Second)
	ns := func(created time.Time, annotations map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "monitoring", CreationTimestamp: metav1.NewTime(created), Annotations: annotations}}
	}
	tess := map[string]string{provenance.CreatedBy: "tess", provenance.CreatedByGroups: `["tenants","system:authenticated"]`}
	admin := map[string]string{provenance.CreatedBy: "admin", provenance.CreatedByGroups: `["system:masters","system:authenticated"]`}
	comma := map[string]string{provenance.CreatedBy: "tess", provenance.CreatedByGroups: `["devs,system:masters","system:authenticated"]`}
	legacy := map[string]string{provenance.CreatedBy: "admin", provenance.CreatedByGroups: "system:masters,system:authenticated"}
	vouched := map[string]string{provenance.VouchedUnder: "policy-uid"}
	for _, tc := range []struct {
		name  string
		ns    *corev1.Namespace
		stamp provenance.Stamp
		want  bool
		why   string
	}{
		{"hers", ns(after, tess), stamp, false, "was created by tess"},
		{"hers, however old against anything", ns(after.Add(-24*time.Hour+provenance.Settle), tess), provenance.Stamp{UID: "policy-uid", Since: since.Add(-48 * time.Hour)}, false, "was created by tess"},
		{"an admin's", ns(after, admin), stamp, true, "a trusted identity"},
		{"the user ci", ns(after, map[string]string{provenance.CreatedBy: "ci", provenance.CreatedByGroups: `[]`}), stamp, true, "a trusted identity"},
		{"a group with a comma", ns(after, comma), stamp, false, "none of group:system:masters"},
		{"the comma-joined groups of earlier versions", ns(after, legacy), stamp, false, "cannot be read"},
		{"an admin's stamp, forged before the stamp", ns(since.Add(-time.Hour), admin), stamp, false, "before the stamp of namespace creators was in force"},
		{"an admin's stamp, within Settle of the stamp", ns(since.Add(provenance.Settle), admin), stamp, false, "before the stamp"},
		{"an admin's stamp, no stamp installed", ns(after, admin), provenance.Stamp{}, false, "no stamp of namespace creators is installed"},
		{"unstamped", ns(after, nil), stamp, false, "carries no stamp"},
		{"vouched for under the stamp", ns(since.Add(-time.Hour), vouched), stamp, true, "vouched for"},
		{"vouched for under an earlier stamp", ns(since.Add(-time.Hour), map[string]string{provenance.VouchedUnder: "old-uid"}), stamp, false, "before the stamp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why := provenance.Of(tc.ns, tc.stamp).Trusted("group:system:masters", "ci")
			if got != tc.want || !strings.Contains(why, tc.why) {
				t.Errorf("Trusted = %v (%s), want %v (%s)", got, why, tc.want, tc.why)
			}
		})
	}
	policy := &metav1.ObjectMeta{UID: types.UID("policy-uid"), CreationTimestamp: metav1.NewTime(since)}
	if got := provenance.StampOf(policy); got != stamp {
		t.Errorf("StampOf = %+v, want %+v", got, stamp)
	}
}

// The groups' encoding reads back every group as the one it is, whatever
// commas, quotes, backslashes or control characters it holds: as the stamp
// writes it (only backslashes and quotes escaped), and as encoding/json
// writes it.
func TestGroupsRoundTrip(t *testing.T) {
	groups := []string{"devs,system:masters", `a","system:masters`, `back\slash\`, "line\nbreak\x01", `\u0022`, "system:authenticated"}
	// As the stamp's CEL writes it.
	var b strings.Builder
	b.WriteString("[")
	for i, g := range groups {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"` + strings.ReplaceAll(strings.ReplaceAll(g, `\`, `\\`), `"`, `\"`) + `"`)
	}
	b.WriteString("]")
	for _, v := range []string{b.String(), provenance.EncodeGroups(groups)} {
		got, err := provenance.DecodeGroups(v)
		if err != nil || !slices.Equal(got, groups) {
			t.Errorf("DecodeGroups(%q) = %q, %v; want %q", v, got, err, groups)
		}
	}
	if got, err := provenance.DecodeGroups(provenance.EncodeGroups(nil)); err != nil || len(got) != 0 {
		t.Errorf("no groups read back as %q, %v", got, err)
	}
	for _, bad := range []string{"system:masters,system:authenticated", `["a",`, `{"a":1}`} {
		if got, err := provenance.DecodeGroups(bad); err == nil || !strings.Contains(err.Error(), "expected a JSON list of strings") {
			t.Errorf("DecodeGroups(%q) = %q, %v; want an error saying what was expected", bad, got, err)
		}
	}
}
