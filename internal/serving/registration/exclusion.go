package registration

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/vigilkit/vigil/internal/definition/spec"
)

// GatedObjects are the objects the module's webhooks and checks exclude
// (Options.Gated): spec.Module.Exclusions.
func GatedObjects(m *spec.Module) []spec.Exclusion { return m.Exclusions() }

// VerifyExclusions asks mapper the scope of each kind the definition could
// not tell (spec.Exclusion.Unverified) that one of the module's webhooks or
// checks governs: such an exclusion is rendered as cluster-scoped, so a kind
// that turns out namespaced is a gate that waits by name in every namespace
// and would need a wider one — the mistake spec.Module.ExclusionProblems
// finds for the kinds it knows. The error names the gate's call site and
// what to do; a kind the API server does not serve is an error too.
func VerifyExclusions(mapper meta.RESTMapper, m *spec.Module) error {
	var errs []string
	for _, e := range m.Exclusions() {
		if !e.Unverified() {
			continue
		}
		by := m.Governs(e.Group, e.Kind)
		if len(by) == 0 {
			continue
		}
		mapping, err := mapper.RESTMapping(schema.GroupKind{Group: e.Group, Kind: e.Kind}, e.Version)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: gate %s waits for %s %s: whether %s is namespaced, which decides what %s must exclude, cannot be told: %v: install the kind's CustomResourceDefinition before the module, or give the gate InNamespace when the kind is namespaced",
				e.Site, e.Gate, e.Kind, e.Name, schema.GroupVersionKind{Group: e.Group, Version: e.Version, Kind: e.Kind}, strings.Join(by, ", "), err))
			continue
		}
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			errs = append(errs, spec.WideGateError(e.Site, e.Gate, e.Kind, e.Name, by).Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("gated objects: %s", strings.Join(errs, "; "))
	}
	return nil
}

// exclusion is the module's exclusion policy (spec.ExclusionPolicy), before
// any capability's namespaces or opt-out label.
func (r *Registrar) exclusion() spec.ExclusionPolicy {
	return spec.NewExclusionPolicy(r.opts.Namespace, r.opts.Ignored, r.opts.Gated)
}
