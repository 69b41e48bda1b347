package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/vigilkit/vigil/gate"
)

// WaitOptions are the checked and parsed options of `vigil wait`, as
// WaitFlags.ToOptions makes them: the condition, what to wait for, and how.
type WaitOptions struct {
	cond        gate.Cond
	established bool // one of the conditions is established: CRDs only
	targets     []waitTarget
	named       bool // the targets name their objects; else a selector picks them
	labels      labels.Selector
	fields      fields.Selector
	anyOne      bool
	atLeast     int
	// namespace is empty for every namespace (-A).
	namespace        string
	timeout          time.Duration
	output           string
	progressInterval time.Duration
	config           *rest.Config
	errOut           io.Writer
}

// waitTarget is one TYPE with the names to wait for (none with a selector).
type waitTarget struct {
	typ   string
	names []string
}

// parseWaitArgs splits the arguments the way kubectl's resource builder does;
// hasSelector is -l or --field-selector, all --all, allNamespaces -A.
func parseWaitArgs(args []string, hasSelector, all, allNamespaces bool) ([]waitTarget, error) {
	if len(args) == 0 {
		return nil, errors.New("expected what to wait for: TYPE/NAME, TYPE NAME... or TYPE with -l, --field-selector or --all, e.g. vigil wait cm/settings --for=create")
	}
	selecting := hasSelector || all
	var targets []waitTarget
	if strings.Contains(args[0], "/") {
		for _, a := range args {
			typ, name, ok := strings.Cut(a, "/")
			if !ok {
				return nil, fmt.Errorf("argument %q: expected TYPE/NAME like the arguments before it; there is no need to give a type as a separate argument when giving TYPE/NAME", a)
			}
			if typ == "" || name == "" || strings.Contains(name, "/") {
				return nil, fmt.Errorf("argument %q: expected TYPE/NAME, e.g. configmap/settings", a)
			}
			targets = append(targets, waitTarget{typ: typ, names: []string{name}})
		}
	} else {
		for _, a := range args[1:] {
			if strings.Contains(a, "/") {
				return nil, fmt.Errorf("argument %q: expected a NAME after the TYPE %q, or TYPE/NAME arguments only", a, args[0])
			}
		}
		targets = []waitTarget{{typ: args[0], names: args[1:]}}
	}
	for _, t := range targets {
		for _, typ := range strings.Split(t.typ, ",") {
			if typ == "" {
				return nil, fmt.Errorf("type %q: expected types separated by single commas", t.typ)
			}
		}
	}
	named := len(targets[0].names) > 0
	switch {
	case named && hasSelector:
		return nil, errors.New("names and a selector: expected one of them: a name cannot be given with -l or --field-selector")
	case named && all:
		return nil, errors.New("names and --all: expected one of them: --all selects every object of the type")
	case named && allNamespaces:
		return nil, errors.New("a resource cannot be retrieved by name across all namespaces: drop -A or give the namespace with -n")
	case !named && !selecting:
		return nil, fmt.Errorf("resource(s) were provided, but no name was specified: give TYPE/NAME, TYPE NAME..., or select with -l, --field-selector or --all, e.g. vigil wait %s --all --for=create", args[0])
	}
	return targets, nil
}

// parseWaitFor turns --for values into one condition, and says whether one of
// them is established, which only a CRD can satisfy.
func parseWaitFor(values []string) (cond gate.Cond, established bool, err error) {
	if len(values) == 0 {
		return nil, false, fmt.Errorf("--for: expected a condition to wait for: %s", waitForForms)
	}
	var conds []gate.Cond
	for _, v := range values {
		c, err := parseOneWaitFor(v)
		if err != nil {
			return nil, false, err
		}
		if strings.EqualFold(v, "established") {
			// Established needs the type, known only later.
			established = true
		} else if val, ok := c.(gate.Validator); ok {
			// Bad JSONPath or CEL fails now, before anything is waited for.
			if err := val.Validate(schema.GroupVersionKind{}); err != nil {
				return nil, false, fmt.Errorf("--for=%s: %w", v, err)
			}
		}
		conds = append(conds, c)
	}
	if len(conds) == 1 {
		return conds[0], established, nil
	}
	return gate.And(conds...), established, nil
}

func parseOneWaitFor(v string) (gate.Cond, error) {
	lower := strings.ToLower(v)
	switch {
	case lower == "create":
		return gate.Created(), nil
	case lower == "delete":
		return gate.Gone(), nil
	case lower == "established":
		return gate.Established(), nil
	case lower == "ready":
		return gate.Ready(), nil
	case strings.HasPrefix(lower, "condition="):
		typ, status, hasStatus := strings.Cut(v[len("condition="):], "=")
		if typ == "" {
			return nil, fmt.Errorf("--for=%s: expected a condition type, as in --for=condition=Ready or --for=condition=Ready=False", v)
		}
		want := metav1.ConditionTrue
		if hasStatus {
			switch {
			case strings.EqualFold(status, "true"):
			case strings.EqualFold(status, "false"):
				want = metav1.ConditionFalse
			case strings.EqualFold(status, "unknown"):
				want = metav1.ConditionUnknown
			default:
				return nil, fmt.Errorf("--for=%s: expected the status True, False or Unknown after %s=, got %q", v, typ, status)
			}
		}
		return gate.Condition(typ, want), nil
	case strings.HasPrefix(lower, "jsonpath="):
		parts := splitWaitJSONPath(v[len("jsonpath="):])
		if len(parts) > 2 {
			return nil, fmt.Errorf("--for=%s: expected --for=jsonpath='{.status.readyReplicas}'=3 or --for=jsonpath='{.status.readyReplicas}': compare with == inside a filter, a single = separates the value", v)
		}
		expr := strings.TrimSpace(trimWaitQuotes(parts[0]))
		if expr == "" {
			return nil, fmt.Errorf("--for=%s: expected a JSONPath expression, as in --for=jsonpath='{.status.phase}'=Running", v)
		}
		value := ""
		if len(parts) == 2 {
			if value = strings.Trim(parts[1], `'"`); value == "" {
				return nil, fmt.Errorf("--for=%s: expected a value after the equal sign, as in --for=jsonpath='{.status.readyReplicas}'=3; leave out the = to accept any value", v)
			}
		}
		return gate.JSONPath(expr, value), nil
	case strings.HasPrefix(lower, "cel="):
		expr := strings.TrimSpace(v[len("cel="):])
		if expr == "" {
			return nil, fmt.Errorf("--for=%s: expected a CEL expression, as in --for=cel='object.status.phase == \"Ready\"'", v)
		}
		return gate.CEL(expr), nil
	}
	return nil, fmt.Errorf("--for=%s: unrecognized condition: expected one of %s", v, waitForForms)
}

// trimWaitQuotes removes one pair of matching quotes, which a shell would have
// removed but a container's args keep.
func trimWaitQuotes(s string) string {
	if len(s) >= 2 && (s[0] == '\'' || s[0] == '"') && s[len(s)-1] == s[0] {
		return s[1 : len(s)-1]
	}
	return s
}

// splitWaitJSONPath splits on single '=' but not on '==', as kubectl does.
func splitWaitJSONPath(input string) []string {
	var out []string
	var b strings.Builder
	for i := 0; i < len(input); i++ {
		if input[i] == '=' {
			if i < len(input)-1 && input[i+1] == '=' {
				b.WriteString("==")
				i++
				continue
			}
			out = append(out, b.String())
			b.Reset()
			continue
		}
		b.WriteByte(input[i])
	}
	return append(out, b.String())
}
