package gate

import (
	"encoding/json"
	"fmt"
	"math"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

var (
	_ Cond = ready{}

	_ Cond      = condition{}
	_ Validator = condition{}
)

// Ready is satisfied when kstatus computes Current for the object. kstatus
// knows the built-in workloads (a Deployment is Current when its rollout is
// complete, a Job when it succeeded), honours observedGeneration, and falls
// back to a Ready condition for other kinds; a kind with no status it
// understands counts as Current as soon as it exists.
func Ready() Cond { return ready{} }

type ready struct{}

func (ready) Check(obj *unstructured.Unstructured) (bool, string) {
	if obj == nil {
		return false, notFound
	}
	res, err := status.Compute(obj)
	if err != nil {
		return false, "kstatus: " + err.Error()
	}
	why := string(res.Status)
	switch {
	case res.Message != "":
		why += ": " + res.Message
	case len(res.Conditions) > 0 && res.Conditions[0].Reason != "":
		// A Ready=False without a message still says why in its reason.
		why += " (reason: " + res.Conditions[0].Reason + ")"
	}
	return res.Status == status.CurrentStatus, why
}

func (ready) String() string { return "ready" }

// Condition is satisfied when the status.conditions entry of type condType has
// the given status and was written for the object's current generation.
//
// A condition is stale when its own observedGeneration (if set and > 0), or
// else status.observedGeneration (if set), is below metadata.generation: the
// controller has not yet looked at the latest spec, so Ready=True from before
// an update says nothing about the update.
func Condition(condType string, status metav1.ConditionStatus) Cond {
	return condition{typ: condType, want: status}
}

type condition struct {
	typ  string
	want metav1.ConditionStatus
}

func (c condition) Check(obj *unstructured.Unstructured) (bool, string) {
	if obj == nil {
		return false, notFound
	}
	raw, found, err := unstructured.NestedFieldNoCopy(obj.Object, "status", "conditions")
	if err != nil {
		return false, err.Error()
	}
	if !found {
		return false, fmt.Sprintf("condition %s not set: no status.conditions", c.typ)
	}
	list, isList := raw.([]any)
	if !isList {
		return false, fmt.Sprintf("status.conditions is %T, want a list", raw)
	}
	var entry map[string]any
	for _, item := range list {
		m, isMap := item.(map[string]any)
		if isMap && m["type"] == c.typ {
			entry = m
			break
		}
	}
	if entry == nil {
		return false, fmt.Sprintf("condition %s not set", c.typ)
	}
	if why := stale(obj, entry); why != "" {
		return false, why
	}
	got, _ := entry["status"].(string)
	seen := fmt.Sprintf("condition %s=%s", c.typ, got)
	if got == "" {
		seen = fmt.Sprintf("condition %s has no status", c.typ)
	}
	if reason, _ := entry["reason"].(string); reason != "" {
		seen += " (reason: " + reason + ")"
	}
	if got != string(c.want) {
		return false, seen + ", want " + string(c.want)
	}
	return true, seen
}

func (c condition) String() string { return fmt.Sprintf("condition %s=%s", c.typ, c.want) }

func (c condition) Validate(schema.GroupVersionKind) error {
	if c.typ == "" {
		return fmt.Errorf("gate.Condition(%q, %q): expected a condition type such as \"Ready\", got an empty string: name the status.conditions type to wait for", c.typ, c.want)
	}
	switch c.want {
	case metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown:
		return nil
	}
	return fmt.Errorf("gate.Condition(%q, %q): expected status True, False or Unknown, got %q: condition statuses are case-sensitive; use metav1.ConditionTrue, metav1.ConditionFalse or metav1.ConditionUnknown", c.typ, c.want, c.want)
}

// stale says why a condition entry cannot be trusted yet, or "" when it can.
func stale(obj *unstructured.Unstructured, entry map[string]any) string {
	gen, ok := toInt64(nested(obj.Object, "metadata", "generation"))
	if !ok || gen <= 0 {
		// Without a generation there is nothing to be behind.
		return ""
	}
	observed, ok := toInt64(entry["observedGeneration"])
	if !ok || observed <= 0 {
		observed, ok = toInt64(nested(obj.Object, "status", "observedGeneration"))
	}
	if ok && observed < gen {
		return fmt.Sprintf("stale status: observedGeneration %d < generation %d", observed, gen)
	}
	return ""
}

func nested(obj map[string]any, fields ...string) any {
	v, found, err := unstructured.NestedFieldNoCopy(obj, fields...)
	if !found || err != nil {
		return nil
	}
	return v
}

// toInt64 accepts every number type an object can hold: int64 from the API
// server's decoder, float64 from encoding/json, plain int from hand-built
// objects.
func toInt64(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case int:
		return int64(n), true
	case int32:
		return int64(n), true
	case float64:
		if n != math.Trunc(n) || math.IsInf(n, 0) {
			return 0, false
		}
		return int64(n), true
	case json.Number:
		i, err := n.Int64()
		return i, err == nil
	}
	return 0, false
}
