package gate_test

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vigilkit/vigil/gate"
)

func widget(status map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1",
		"kind":       "Widget",
		"metadata":   map[string]any{"name": "w", "namespace": "demo", "generation": int64(2)},
		"spec":       map[string]any{"replicas": int64(3)},
		"status":     status,
	}}
}

func ExampleCEL() {
	c := gate.CEL(`object.?status.?readyReplicas.orValue(0) >= object.spec.replicas`)
	fmt.Println(c)
	fmt.Println(c.Check(nil))
	fmt.Println(c.Check(widget(map[string]any{"readyReplicas": int64(1)})))
	ok, _ := c.Check(widget(map[string]any{"readyReplicas": int64(3)}))
	fmt.Println(ok)

	// A mistake in the expression is caught when the module is defined.
	fmt.Println(gate.CEL("object.spec.replicas").(gate.Validator).Validate(schema.GroupVersionKind{}))
	// Output:
	// cel object.?status.?readyReplicas.orValue(0) >= object.spec.replicas
	// false not found
	// false evaluated to false
	// true
	// gate.CEL("object.spec.replicas"): expected a CEL expression of type bool: got type dyn: compare the value, e.g. (object.spec.replicas) == true
}

func ExampleJSONPath() {
	c := gate.JSONPath("{.status.phase}", "Ready")
	fmt.Println(c)
	fmt.Println(c.Check(widget(nil)))
	fmt.Println(c.Check(widget(map[string]any{"phase": "Pending"})))
	fmt.Println(c.Check(widget(map[string]any{"phase": "Ready"})))

	err := gate.JSONPath("{.status.phase", "Ready").(gate.Validator).Validate(schema.GroupVersionKind{})
	fmt.Println(err)
	// Output:
	// jsonpath {.status.phase}=Ready
	// false {.status.phase} not set
	// false {.status.phase}=Pending, want Ready
	// true {.status.phase}=Ready
	// gate.JSONPath("{.status.phase", "Ready"): expected a kubectl-style JSONPath such as {.status.phase}: unclosed action: fix the expression
}

func ExampleCondition() {
	c := gate.Condition("Ready", "True")
	fmt.Println(c)
	fmt.Println(c.Check(widget(map[string]any{
		"conditions": []any{map[string]any{"type": "Ready", "status": "False", "reason": "Waiting"}},
	})))
	// The controller has not caught up with generation 2 yet, so its
	// Ready=True is about an older spec.
	fmt.Println(c.Check(widget(map[string]any{
		"observedGeneration": int64(1),
		"conditions":         []any{map[string]any{"type": "Ready", "status": "True"}},
	})))
	fmt.Println(c.Check(widget(map[string]any{
		"observedGeneration": int64(2),
		"conditions":         []any{map[string]any{"type": "Ready", "status": "True"}},
	})))
	// Output:
	// condition Ready=True
	// false condition Ready=False (reason: Waiting), want True
	// false stale status: observedGeneration 1 < generation 2
	// true condition Ready=True
}

func ExampleEstablished() {
	crd := schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}
	deployment := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	v := gate.Established().(gate.Validator)
	fmt.Println(v.Validate(crd))
	fmt.Println(v.Validate(deployment))
	// Output:
	// <nil>
	// gate.Established: expected a CustomResourceDefinition, got apps/v1 Deployment: Established applies only to CRDs; use gate.Ready() or gate.Condition("Available", "True")
}

func ExampleGone() {
	cm := func(uid string) *unstructured.Unstructured {
		o := &unstructured.Unstructured{}
		o.SetAPIVersion("v1")
		o.SetKind("ConfigMap")
		o.SetNamespace("demo")
		o.SetName("settings")
		o.SetUID(types.UID(uid))
		return o
	}
	// The engine takes a fresh copy per wait, so UIDs never carry over.
	d := gate.Gone().(gate.Stateful).Fresh()
	fmt.Println(d.Check(cm("uid-1")))
	fmt.Println(d.Check(cm("uid-1")))
	fmt.Println(d.Check(cm("uid-2")))
	fmt.Println(d.Check(nil))
	// Output:
	// false still exists (uid uid-1)
	// false still exists (uid uid-1)
	// true recreated: uid uid-2 replaced uid-1
	// true not found
}

func ExampleNot() {
	c := gate.Not(gate.JSONPath("{.status.phase}", "Failed"))
	fmt.Println(c)
	fmt.Println(c.Check(widget(map[string]any{"phase": "Running"})))
	fmt.Println(c.Check(widget(map[string]any{"phase": "Failed"})))
	// Output:
	// not (jsonpath {.status.phase}=Failed)
	// true {.status.phase}=Running, want Failed
	// false {.status.phase}=Failed, want not (jsonpath {.status.phase}=Failed)
}

func ExampleAnd() {
	c := gate.And(gate.Created(), gate.Or(gate.Condition("Ready", "True"), gate.JSONPath(".status.phase", "Ready")))
	fmt.Println(c)
	fmt.Println(c.Check(nil))
	fmt.Println(c.Check(widget(map[string]any{"phase": "Pending"})))
	fmt.Println(c.Check(widget(map[string]any{"phase": "Ready"})))
	// Output:
	// created and (condition Ready=True or jsonpath {.status.phase}=Ready)
	// false not found
	// false condition Ready not set: no status.conditions; {.status.phase}=Pending, want Ready
	// true exists; {.status.phase}=Ready
}

func ExamplePermanent() {
	errBadConfig := errors.New("clusterconfig has no domain")
	err := fmt.Errorf("gate uds-config: %w", gate.Permanent(errBadConfig))
	fmt.Println(err)
	fmt.Println(gate.IsPermanent(err), errors.Is(err, errBadConfig))
	fmt.Println(gate.IsPermanent(errors.New("connection refused")))
	// Output:
	// gate uds-config: clusterconfig has no domain
	// true true
	// false
}
