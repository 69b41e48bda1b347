package spec

import (
	"strings"
	"testing"

	"github.com/vigilkit/vigil/admission"
)

func TestSetFailurePoliciesNeverWeakensFailClosed(t *testing.T) {
	newModule := func() *Module {
		return &Module{Name: "m", Capabilities: []Capability{{Name: "labels"}, {Name: "guard", FailClosed: true, Site: "main.go:12"}}}
	}
	m := newModule()
	if err := m.SetFailurePolicies([]string{"labels=Ignore", "guard=Fail"}); err != nil {
		t.Fatalf("labels=Ignore guard=Fail: %v", err)
	}
	if got := m.Policies(); got["labels"] != admission.Ignore || got["guard"] != admission.Fail || len(got) != 2 {
		t.Errorf("policies %v", got)
	}
	if got := newModule().Policies(); got != nil {
		t.Errorf("policies of a module without overrides %v, want nil", got)
	}
	for _, c := range []struct{ pair, want string }{
		{"guard=Ignore", `capability "guard" is declared FailClosed() (at main.go:12)`},
		{"nosuch=Fail", `module m has no capability "nosuch"; its capabilities: guard, labels`},
		{"labels=Maybe", `expected the policy Fail or Ignore, saw "Maybe"`},
		{"labels", "expected CAPABILITY=Fail or CAPABILITY=Ignore"},
	} {
		m := newModule()
		err := m.SetFailurePolicies([]string{c.pair})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one saying %s", c.pair, err, c.want)
		}
		if m.Policies() != nil {
			t.Errorf("%s: refused, yet set %v", c.pair, m.Policies())
		}
	}
}
