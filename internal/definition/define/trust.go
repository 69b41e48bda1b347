package define

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/vigilkit/vigil/internal/definition/spec"
)

// AddTrustedNamespace records a namespace the module's install creates and
// guards, checking its name and who is allowed; mistakes are recorded at
// t.Site.
func (m *Module) AddTrustedNamespace(t spec.TrustedNamespace) spec.TrustedNamespace {
	var errs []error
	if problems := validation.IsDNS1123Label(t.Name); len(problems) > 0 {
		errs = append(errs, fmt.Errorf("not a namespace name: %s", strings.Join(problems, "; ")))
	}
	switch {
	case t.Name == m.Namespace:
		errs = append(errs, fmt.Errorf("it is the module's own namespace, which its install creates already: name another namespace, whose contents the module trusts"))
	case t.Name == "default" || strings.HasPrefix(t.Name, "kube-"):
		errs = append(errs, fmt.Errorf("it is one of Kubernetes' own namespaces, which the cluster creates: name one of the module's, such as %s-trusted", m.Name))
	}
	errs = append(errs, checkAllowed(t.Allowed)...)
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, other := range m.trusted {
		if other.Name == t.Name {
			errs = append(errs, fmt.Errorf("already declared at %s", other.Site))
		}
	}
	for _, err := range errs {
		m.errs = append(m.errs, fmt.Errorf("%s: TrustedNamespace(%q): %w", t.Site, t.Name, err))
	}
	if len(t.Allowed) == 0 {
		t.Allowed = spec.DefaultTrusted
	}
	m.trusted = append(m.trusted, t)
	return t
}

// SetProvenance records that the module's install records who creates each
// Namespace; mistakes are recorded at p.Site.
func (m *Module) SetProvenance(p spec.Provenance) {
	errs := checkAllowed(p.Allowed)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.provenance != nil {
		errs = append(errs, fmt.Errorf("already declared at %s: declare it once, naming every identity allowed", m.provenance.Site))
	}
	for _, err := range errs {
		m.errs = append(m.errs, fmt.Errorf("%s: NamespaceProvenance: %w", p.Site, err))
	}
	if len(p.Allowed) == 0 {
		p.Allowed = spec.DefaultTrusted
	}
	if m.provenance == nil {
		m.provenance = &p
	}
}

// checkAllowed finds what is wrong with a list of allowed identities; an
// empty list is the default's.
func checkAllowed(allowed []string) []error {
	var errs []error
	for _, a := range allowed {
		if strings.TrimSpace(a) == "" || strings.TrimSpace(strings.TrimPrefix(a, spec.GroupPrefix)) == "" || strings.TrimSpace(a) != a || strings.Contains(a, ",") {
			errs = append(errs, fmt.Errorf("allowed %q: expected a username, or group:<name>, without commas", a))
		}
	}
	if len(errs) > 0 {
		return []error{errors.Join(errs...)}
	}
	return nil
}

// trustPolicySites are the names of the policies the trusted namespaces and
// the provenance ship, with where each was declared, so that a check cannot
// take one's name. Called with m.mu held.
func (m *Module) trustPolicySites() map[string]string {
	out := map[string]string{}
	for _, t := range m.trusted {
		out[spec.PolicyName(m.Name, spec.TrustGuard, t.Name)] = t.Site + " (the guard of trusted namespace " + t.Name + ")"
	}
	if p := m.provenance; p != nil {
		out[spec.PolicyName(m.Name, "namespace", spec.ProvenanceGuard)] = p.Site + " (the guard of the namespace provenance)"
	}
	return out
}
