package gate

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/jsonpath"
)

var (
	_ Cond      = jsonPath{}
	_ Validator = jsonPath{}
)

// JSONPath is satisfied when the kubectl-style JSONPath expression expr, such
// as "{.status.phase}", yields exactly one value whose string form equals
// value, as with kubectl wait --for=jsonpath='{.status.phase}'=Ready. With an
// empty value any value will do, as long as the field is there. A bare path
// such as ".status.phase" is wrapped in braces.
//
// The expression is parsed here; a parse error is returned by Validate.
func JSONPath(expr string, value string) Cond {
	j := jsonPath{orig: expr, expr: normalizeJSONPath(expr), value: value}
	// Evaluating against an empty object catches what the parser lets
	// through but every evaluation would reject, such as an unknown
	// identifier in {foo}, while missing fields are still allowed.
	var findErr error
	j.err = parseJSONPath(j.expr, func(jp *jsonpath.JSONPath) {
		_, findErr = jp.FindResults(map[string]any{})
	})
	if j.err == nil {
		j.err = findErr
	}
	return j
}

type jsonPath struct {
	orig  string // as written, for errors that point at the definition
	expr  string
	value string
	err   error
}

// relaxedJSONPath is kubectl's pattern for a single field path, with or
// without braces and leading dot.
var relaxedJSONPath = regexp.MustCompile(`^\{\.?([^{}]+)\}$|^\.?([^{}]+)$`)

// normalizeJSONPath accepts what kubectl wait accepts: "{.a.b}", "{a.b}",
// ".a.b" and "a.b" all mean {.a.b}. Anything else, such as a {range}
// template, goes to the parser as written.
func normalizeJSONPath(expr string) string {
	expr = strings.TrimSpace(expr)
	m := relaxedJSONPath.FindStringSubmatch(expr)
	if m == nil {
		return expr
	}
	field := m[1]
	if field == "" {
		field = m[2]
	}
	return "{." + field + "}"
}

// parseJSONPath parses expr into a new JSONPath and hands it to use. A fresh
// JSONPath per call is deliberate: FindResults keeps range state in the
// JSONPath and rewrites its parse tree for {range}, so one instance can be
// neither shared between goroutines nor reused safely. Parsing a short path
// costs microseconds.
//
// It also turns panics into errors: the parser and evaluator have panicked on
// malformed input before, and a gate must never take the engine down.
func parseJSONPath(expr string, use func(*jsonpath.JSONPath)) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("jsonpath panicked: %v", r)
		}
	}()
	if expr == "" {
		return fmt.Errorf("empty expression")
	}
	jp := jsonpath.New("gate").AllowMissingKeys(true)
	if err := jp.Parse(expr); err != nil {
		return err
	}
	use(jp)
	return nil
}

func (j jsonPath) Check(obj *unstructured.Unstructured) (bool, string) {
	if j.err != nil {
		return false, "invalid jsonpath " + j.expr + ": " + j.err.Error()
	}
	if obj == nil {
		return false, notFound
	}
	var results [][]reflect.Value
	var findErr error
	err := parseJSONPath(j.expr, func(jp *jsonpath.JSONPath) {
		results, findErr = jp.FindResults(obj.Object)
	})
	if err == nil {
		err = findErr
	}
	if err != nil {
		return false, j.expr + ": " + err.Error()
	}
	var values []any
	for _, list := range results {
		for _, v := range list {
			// A field that is present but null is as good as missing.
			if v.IsValid() && !(isNilable(v.Kind()) && v.IsNil()) {
				values = append(values, v.Interface())
			}
		}
	}
	switch {
	case len(values) == 0:
		return false, j.expr + " not set"
	case len(values) > 1:
		return false, fmt.Sprintf("%s matches %d values, want exactly one", j.expr, len(values))
	}
	got := values[0]
	if j.value == "" {
		return true, fmt.Sprintf("%s is set", j.expr)
	}
	switch got.(type) {
	case map[string]any:
		return false, fmt.Sprintf("%s is an object, want %s: point the path at a single field", j.expr, j.value)
	case []any:
		return false, fmt.Sprintf("%s is a list, want %s: point the path at a single field", j.expr, j.value)
	}
	s := fmt.Sprintf("%v", got)
	seen := j.expr + "=" + s
	if strings.TrimSpace(s) != strings.TrimSpace(j.value) {
		return false, seen + ", want " + j.value
	}
	return true, seen
}

func isNilable(k reflect.Kind) bool {
	switch k {
	case reflect.Interface, reflect.Map, reflect.Pointer, reflect.Slice:
		return true
	}
	return false
}

func (j jsonPath) String() string {
	if j.value == "" {
		return "jsonpath " + j.expr
	}
	return "jsonpath " + j.expr + "=" + j.value
}

func (j jsonPath) Validate(schema.GroupVersionKind) error {
	if j.err == nil {
		return nil
	}
	return fmt.Errorf("gate.JSONPath(%q, %q): expected a kubectl-style JSONPath such as {.status.phase}: %v: fix the expression", j.orig, j.value, j.err)
}
