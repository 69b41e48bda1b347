package policytest

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/google/cel-go/cel"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/vigilkit/vigil/internal/clusters/kubeversion"
	"github.com/vigilkit/vigil/internal/definition/celversion"
	"github.com/vigilkit/vigil/internal/definition/spec"
)

// checked is a check's answer: its policy denied (Enforce) or warned.
type checked struct {
	policy  string
	message string
	warn    bool
}

// runChecks evaluates the module's checks (the ValidatingAdmissionPolicies
// it ships) that match req, as the API server does: each whose kind,
// operation and capability's exclusions match, its expression over the
// request's objects. It returns the denials and warnings in the order the
// checks were declared.
func runChecks(m *spec.Module, req *admissionv1.AdmissionRequest, namespaces map[string]map[string]any) ([]checked, error) {
	var out []checked
	var vars map[string]any
	for i := range m.Checks {
		c := &m.Checks[i]
		if !checkMatches(m, c, req, namespaces) || c.Mode == spec.Audit {
			continue
		}
		if vars == nil {
			var err error
			if vars, err = checkVars(req, namespaces); err != nil {
				return nil, err
			}
		}
		ok, err := evalCheck(c.Expression, target(m), vars)
		if err != nil {
			return nil, fmt.Errorf("check %s (%s): %w", c.ID(), c.Site, err)
		}
		if !ok {
			out = append(out, checked{policy: spec.PolicyName(m.Name, c.Capability, c.Name), message: c.Message, warn: c.Mode == spec.Warn})
		}
	}
	return out, nil
}

// checkMatches reports whether check c's policy binding matches req.
func checkMatches(m *spec.Module, c *spec.Check, req *admissionv1.AdmissionRequest, namespaces map[string]map[string]any) bool {
	if req.Kind.Group != c.GVK.Group || req.Kind.Kind != c.GVK.Kind || req.SubResource != c.Subresource {
		return false
	}
	if len(c.Operations) > 0 && !slices.Contains(c.Operations, req.Operation) {
		return false
	}
	if len(c.Namespaces) > 0 && !slices.Contains(c.Namespaces, req.Namespace) {
		return false
	}
	i := slices.IndexFunc(m.Capabilities, func(cp spec.Capability) bool { return cp.Name == c.Capability })
	if i < 0 {
		return false
	}
	return m.ExclusionPolicy().Of(m.Name, m.Capabilities[i]).Admits(exclusionRequest(req, namespaceLabels(namespaces[req.Namespace])))
}

// target is the release the module's checks are compiled for: the oldest
// it targets (spec.Module.MinKubernetes), as the API server of that release
// compiles them.
func target(m *spec.Module) kubeversion.Release {
	if r, err := kubeversion.Parse(m.MinKubernetes); err == nil && m.MinKubernetes != "" {
		return r
	}
	return kubeversion.Oldest()
}

// programs are the checks' expressions compiled, by release and expression.
var programs sync.Map // programKey → cel.Program

type programKey struct {
	minor int
	expr  string
}

func program(expr string, r kubeversion.Release) (cel.Program, error) {
	key := programKey{r.Minor, expr}
	if p, ok := programs.Load(key); ok {
		return p.(cel.Program), nil
	}
	ast, err := celversion.CompilePolicy(expr, r)
	if err != nil {
		return nil, err
	}
	env, err := celversion.PolicyEnv(r.Minor)
	if err != nil {
		return nil, err
	}
	prg, err := env.Program(ast)
	if err != nil {
		return nil, err
	}
	programs.Store(key, prg)
	return prg, nil
}

func evalCheck(expr string, r kubeversion.Release, vars map[string]any) (bool, error) {
	prg, err := program(expr, r)
	if err != nil {
		return false, err
	}
	v, _, err := prg.Eval(vars)
	if err != nil {
		return false, fmt.Errorf("evaluates to an error: %w", err)
	}
	b, ok := v.Value().(bool)
	if !ok {
		return false, fmt.Errorf("evaluates to %v, not a bool", v)
	}
	return b, nil
}

// checkVars are the variables of a check's expression: object and
// oldObject (null when absent), request, namespaceObject.
func checkVars(req *admissionv1.AdmissionRequest, namespaces map[string]map[string]any) (map[string]any, error) {
	vars := map[string]any{"object": nil, "oldObject": nil, "namespaceObject": nil}
	for name, raw := range map[string][]byte{"object": req.Object.Raw, "oldObject": req.OldObject.Raw} {
		if len(raw) == 0 {
			continue
		}
		var v map[string]any
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, err
		}
		vars[name] = v
	}
	var r map[string]any
	raw, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, err
	}
	delete(r, "object")
	delete(r, "oldObject")
	vars["request"] = r
	if req.Namespace != "" {
		if ns, ok := namespaces[req.Namespace]; ok {
			vars["namespaceObject"] = ns
		} else {
			vars["namespaceObject"] = map[string]any{
				"apiVersion": "v1", "kind": "Namespace",
				"metadata": map[string]any{"name": req.Namespace, "labels": map[string]any{"kubernetes.io/metadata.name": req.Namespace}},
			}
		}
	}
	return vars, nil
}
