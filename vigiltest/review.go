package vigiltest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/internal/commands/policytest"
	"github.com/vigilkit/vigil/internal/definition/define"
	"github.com/vigilkit/vigil/internal/definition/spec"
)

// Request is an admission request Review sends through a module's webhooks,
// in process: no control plane, no Env.
type Request struct {
	// Object is the object sent; OldObject the object before an UPDATE or
	// DELETE.
	Object, OldObject client.Object
	// Operation is CREATE when empty, UPDATE with an OldObject, DELETE with
	// an OldObject alone.
	Operation   admissionv1.Operation
	SubResource string
	// User and Groups send the request; policy-test and
	// system:authenticated when empty.
	User   string
	Groups []string
	DryRun bool
	// Objects are what the module's listers find, Namespaces (with their
	// labels) among them.
	Objects []client.Object
	// Store holds the module's Store keys as stored: "key" in the
	// module-wide scope, "<capability>/key" in a capability's.
	Store map[string]string
}

// Answer is how a module answered a Request.
type Answer struct {
	Allowed bool
	// Message is the denial's, Code its HTTP status, Webhook the webhook
	// (or, for a check, the ValidatingAdmissionPolicy) that denied.
	Message  string
	Code     int32
	Webhook  string
	Warnings []string
	// Patch are the mutations' operations, in the order their webhooks ran.
	Patch Patch
	// Object is the object as admitted, the patch applied.
	Object *unstructured.Unstructured
	// Webhooks are the module's webhooks that saw the request, in order.
	Webhooks []string
}

// Review sends r through m's webhooks in process, as the API server would
// send it: to the capabilities whose rules and exclusions (namespaces,
// opt-out labels) match it, mutations first, each seeing the object as
// those before it patched it, then the module's checks (its
// ValidatingAdmissionPolicies' CEL) and every validation. A failing or
// panicking handler is answered by the failure policy. The module's listers
// read r.Objects, its Store holds r.Store; handlers have no API server
// (ClientFrom returns nil: a handler that calls the API server is answered by
// its failure policy). It takes milliseconds: see `<module> test`
// for the same run from case files.
func Review(t testing.TB, m *vigil.Module, r Request) Answer {
	t.Helper()
	s := resolved(t, m)
	c := policytest.Case{Name: t.Name(), Operation: r.Operation, SubResource: r.SubResource, DryRun: r.DryRun, Store: r.Store}
	var err error
	if r.Object != nil {
		if c.Object, err = toMap(s, r.Object); err != nil {
			t.Fatalf("vigiltest.Review: Object: %v", err)
		}
	}
	if r.OldObject != nil {
		if c.OldObject, err = toMap(s, r.OldObject); err != nil {
			t.Fatalf("vigiltest.Review: OldObject: %v", err)
		}
	}
	if c.Object == nil && c.OldObject == nil {
		t.Fatal("vigiltest.Review: expected an Object (or, for a DELETE, an OldObject), got neither")
	}
	if r.User != "" || len(r.Groups) > 0 {
		c.User = &policytest.User{Username: r.User, Groups: r.Groups}
	}
	for i, o := range r.Objects {
		u, err := toMap(s, o)
		if err != nil {
			t.Fatalf("vigiltest.Review: Objects[%d]: %v", i, err)
		}
		c.Objects = append(c.Objects, u)
	}
	res, err := policytest.Run(t.Context(), s, c)
	if err != nil {
		t.Fatalf("vigiltest.Review: %v", err)
	}
	return answerOf(res)
}

// ReviewRequest sends one AdmissionRequest — a whole AdmissionReview's, as
// the API server would send it — through m's webhooks in process, as Review
// does, with objects for its listers and store for its Store.
func ReviewRequest(t testing.TB, m *vigil.Module, req *admissionv1.AdmissionRequest, objects []client.Object, store map[string]string) Answer {
	t.Helper()
	s := resolved(t, m)
	var fixtures []map[string]any
	for i, o := range objects {
		u, err := toMap(s, o)
		if err != nil {
			t.Fatalf("vigiltest.ReviewRequest: objects[%d]: %v", i, err)
		}
		fixtures = append(fixtures, u)
	}
	res, err := policytest.Send(t.Context(), s, req.DeepCopy(), fixtures, store)
	if err != nil {
		t.Fatalf("vigiltest.ReviewRequest: %v", err)
	}
	return answerOf(res)
}

// Cases runs every case file of dir (see `<module> test --help` for their
// form) through m's webhooks in process, each case a subtest that fails
// with how the answer differs from what it expects.
func Cases(t *testing.T, m *vigil.Module, dir string) {
	t.Helper()
	s := resolved(t, m)
	cases, err := policytest.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			res, err := policytest.Run(t.Context(), s, c)
			if err != nil {
				t.Fatalf("%s: %v", c.File, err)
			}
			if diff := policytest.Diff(c, res); len(diff) > 0 {
				t.Errorf("%s:\n  %s", c.File, strings.Join(diff, "\n  "))
			}
		})
	}
}

// resolved is m's spec; a module with definition mistakes fails the test.
func resolved(t testing.TB, m *vigil.Module) *spec.Module {
	t.Helper()
	s, mistakes, ok := define.Resolved(m)
	if !ok {
		t.Fatalf("vigiltest: expected a *vigil.Module made by vigil.NewModule, got %T", m)
	}
	if mistakes != nil {
		t.Fatalf("module %s has definition mistakes:\n%v", s.Name, mistakes)
	}
	return s
}

func toMap(s *spec.Module, obj client.Object) (map[string]any, error) {
	gvk := obj.GetObjectKind().GroupVersionKind()
	if gvk.Empty() {
		var err error
		if gvk, err = apiutil.GVKForObject(obj, s.Scheme); err != nil {
			return nil, fmt.Errorf("%T: %w: register its type in the module's Scheme, or set its apiVersion and kind", obj, err)
		}
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	out := &unstructured.Unstructured{Object: u}
	out.SetGroupVersionKind(gvk)
	unstructured.RemoveNestedField(out.Object, "metadata", "creationTimestamp")
	return out.Object, nil
}

func answerOf(r policytest.Result) Answer {
	a := Answer{Allowed: r.Allowed, Message: r.Message, Code: r.Code, Webhook: r.Webhook, Warnings: r.Warnings, Webhooks: r.Webhooks}
	if r.Object != nil {
		a.Object = &unstructured.Unstructured{Object: r.Object}
	}
	for _, op := range r.Patch {
		o := jsonpatch.Operation{Operation: op.Op, Path: op.Path}
		if len(op.Value) > 0 {
			var v any
			if err := json.Unmarshal(op.Value, &v); err == nil {
				o.Value = v
			}
		}
		a.Patch = append(a.Patch, o)
	}
	return a
}
