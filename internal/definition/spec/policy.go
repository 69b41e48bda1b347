package spec

import (
	"fmt"
	"sort"
	"strings"

	"github.com/vigilkit/vigil/admission"
)

// Policies are the capabilities' own failure policies, by capability name;
// nil when none overrides the module's.
func (m *Module) Policies() map[string]admission.FailurePolicy {
	var out map[string]admission.FailurePolicy
	for _, c := range m.Capabilities {
		if c.FailurePolicy == "" {
			continue
		}
		if out == nil {
			out = map[string]admission.FailurePolicy{}
		}
		out[c.Name] = c.FailurePolicy
	}
	return out
}

// SetFailurePolicies sets capabilities' failure policies from
// CAPABILITY=Fail|Ignore pairs (the --failure-policy flag). It refuses an
// unknown capability or policy, and Ignore on a fail-closed capability:
// nothing given at deployment weakens what the author declared FailClosed().
func (m *Module) SetFailurePolicies(pairs []string) error {
	for _, pair := range pairs {
		name, policy, ok := strings.Cut(pair, "=")
		if !ok {
			return fmt.Errorf("--failure-policy %q: expected CAPABILITY=Fail or CAPABILITY=Ignore", pair)
		}
		p := admission.FailurePolicy(policy)
		if p != admission.Fail && p != admission.Ignore {
			return fmt.Errorf("--failure-policy %q: expected the policy Fail or Ignore, saw %q", pair, policy)
		}
		i := -1
		for j := range m.Capabilities {
			if m.Capabilities[j].Name == name {
				i = j
			}
		}
		if i < 0 {
			var names []string
			for _, c := range m.Capabilities {
				names = append(names, c.Name)
			}
			sort.Strings(names)
			return fmt.Errorf("--failure-policy %q: module %s has no capability %q; its capabilities: %s", pair, m.Name, name, strings.Join(names, ", "))
		}
		if m.Capabilities[i].FailClosed && p == admission.Ignore {
			return fmt.Errorf("--failure-policy %q: capability %q is declared FailClosed() (at %s): its webhooks fail closed whatever the deployment says; remove the override (the chart's failurePolicy.%s)", pair, name, m.Capabilities[i].Site, name)
		}
		m.Capabilities[i].FailurePolicy = p
	}
	return nil
}
