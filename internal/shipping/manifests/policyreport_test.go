package manifests

import (
	"slices"
	"testing"

	"github.com/vigilkit/vigil/internal/definition/spec"
)

// The watcher's rights on PolicyReports name its own report, vigil-<module>,
// for every verb RBAC can narrow by name; create, which it cannot, is the
// only one left unnamed. (internal/serving/audit TestWatcherWritesOnlyItsOwnPolicyReport
// tries them against the API server.)
func TestWatcherPolicyReportRightsNameItsOwn(t *testing.T) {
	m := sample()
	own := spec.PolicyReportName(m.Name)
	var named, create bool
	for _, r := range Rules(m) {
		if r.Role != Watcher || !slices.Contains(r.Resources, spec.PolicyReports.Resource) {
			continue
		}
		if len(r.ResourceNames) == 0 {
			if !slices.Equal(r.Verbs, []string{"create"}) {
				t.Errorf("the watcher's rule on PolicyReports %+v names no report; only create may (RBAC cannot narrow it by name)", r.PolicyRule)
			}
			create = true
			continue
		}
		if !slices.Equal(r.ResourceNames, []string{own}) {
			t.Errorf("the watcher's rule on PolicyReports %+v; want it on %s only", r.PolicyRule, own)
		}
		named = true
	}
	if !named || !create {
		t.Fatalf("the watcher's rules on PolicyReports: named %v, create %v; want both", named, create)
	}
}
