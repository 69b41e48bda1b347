package gate

import (
	"fmt"
	"sync"

	"github.com/google/cel-go/cel"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/vigilkit/vigil/internal/clusters/kubeversion"
	"github.com/vigilkit/vigil/internal/definition/celversion"
)

var (
	_ Cond      = celCond{}
	_ Validator = celCond{}
)

// celCostLimit bounds one evaluation. A condition runs on every change of
// every watched object, so a comprehension over a huge list must fail fast
// with an error rather than stall the engine. Ordinary field comparisons cost
// a few units.
const celCostLimit = 1_000_000

// celEnv is built once: creating an environment costs far more than compiling
// a short expression, and every CEL condition uses the same declarations.
// It is the API server's base environment of the oldest Kubernetes release
// vigil supports — its libraries, optional field access
// (object.?status.?phase.orValue("")) for a status not written yet, and its
// validators — so that a condition reads as a ValidatingAdmissionPolicy's
// expression does on every cluster the module runs on.
var celEnv = sync.OnceValues(func() (*cel.Env, error) {
	return celversion.Base(kubeversion.Oldest(), cel.Variable("object", cel.DynType))
})

// CEL is satisfied when the CEL expression expr evaluates to true. The object
// is bound to the variable object as a dynamic map, or to null when there is
// no object, so "object == null" waits for absence.
//
// The expression is compiled once, here, and must be of type bool; a compile
// error is returned by Validate. An evaluation error, most often "no such key"
// because the status is not written yet, means not satisfied; has() and
// optional access (object.?status.?ready.orValue(false)) avoid it.
func CEL(expr string) Cond {
	c := celCond{expr: expr}
	c.prg, c.err = compileCEL(expr)
	return c
}

type celCond struct {
	expr string
	prg  cel.Program
	err  error
}

func compileCEL(expr string) (cel.Program, error) {
	env, err := celEnv()
	if err != nil {
		return nil, err
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	if out := ast.OutputType(); !out.IsExactType(cel.BoolType) {
		// Fields of object are dyn, so a bare field is the usual mistake;
		// insisting on bool now beats a gate that errors on every change.
		if out.IsExactType(cel.DynType) {
			return nil, fmt.Errorf("got type dyn: compare the value, e.g. (%s) == true", expr)
		}
		return nil, fmt.Errorf("got type %s: make it a comparison, e.g. object.spec.replicas > 0", out)
	}
	return env.Program(ast, cel.CostLimit(celCostLimit))
}

func (c celCond) Check(obj *unstructured.Unstructured) (bool, string) {
	if c.err != nil {
		return false, "cel: invalid expression: " + c.err.Error()
	}
	var object any
	if obj != nil {
		object = obj.Object
	}
	out, _, err := c.prg.Eval(map[string]any{"object": object})
	if err != nil {
		if obj == nil {
			// "no such key: spec" would hide that there is no object at all.
			return false, notFound
		}
		return false, "cel: " + err.Error()
	}
	switch out.Value() {
	case true:
		return true, ""
	case false:
		if obj == nil {
			return false, notFound
		}
		return false, "evaluated to false"
	}
	return false, fmt.Sprintf("cel: evaluated to %v, want a bool", out)
}

func (c celCond) String() string { return "cel " + c.expr }

func (c celCond) Validate(schema.GroupVersionKind) error {
	if c.err == nil {
		return nil
	}
	return fmt.Errorf("gate.CEL(%q): expected a CEL expression of type bool: %v", c.expr, c.err)
}
