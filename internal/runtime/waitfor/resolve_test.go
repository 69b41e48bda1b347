package waitfor_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/gate"
	"github.com/vigilkit/vigil/internal/runtime/waitfor"
	"github.com/vigilkit/vigil/vigiltest"
)

// twoVersionCRD is a namespaced CRD serving v1 and v2 (the storage version).
func twoVersionCRD(plural, kind, group string) []byte {
	return fmt.Appendf(nil, `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: %[1]s.%[3]s
spec:
  group: %[3]s
  scope: Namespaced
  names: {plural: %[1]s, kind: %[2]s}
  versions:
    - name: v1
      served: true
      storage: false
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
    - name: v2
      served: true
      storage: true
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`, plural, kind, group)
}

func installCRD(t *testing.T, yaml []byte) {
	t.Helper()
	crds, err := vigiltest.DecodeCRDs(yaml)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(t.Context(), crds[0]); err != nil {
		t.Fatal(err)
	}
}

// Resolve resolves served types as kubectl does.
func TestResolveServedTypes(t *testing.T) {
	w := newWaiter(t, env.Config)
	for arg, want := range map[string]waitfor.Type{
		"cm":                  {GVK: configMapGVK, Resource: "configmaps", Namespaced: true},
		"ConfigMap":           {GVK: configMapGVK, Resource: "configmaps", Namespaced: true},
		"deployments.v1.apps": {GVK: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, Resource: "deployments", Namespaced: true},
		"crd":                 {GVK: schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}, Resource: "customresourcedefinitions"},
	} {
		got, err := w.Resolve(arg, nil)
		if err != nil || got != want {
			t.Errorf("Resolve(%q) = %+v, %v; want %+v", arg, got, err, want)
		}
	}
}

// TYPE.VERSION.GROUP of a type not served yet waits for that version of that
// group: with a CRD serving v1 and v2, the type is v1, not the newest.
func TestAwaitServedTypeVersionGroup(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	w := newWaiter(t, env.Config)
	_, err := w.Resolve("doohickeys.v1.resolve.vigil.dev", nil)
	var notServed *waitfor.NotServedError
	if !errors.As(err, &notServed) || !errors.Is(err, waitfor.ErrNotServed) {
		t.Fatalf("Resolve of a type not served = %v, want a *NotServedError", err)
	}
	if notServed.Group != "resolve.vigil.dev" || notServed.Version != "v1" || notServed.Name != "doohickeys" {
		t.Fatalf("NotServedError %+v: want doohickeys in group resolve.vigil.dev version v1", *notServed)
	}
	type resolved struct {
		typ waitfor.Type
		err error
	}
	ch := make(chan resolved, 1)
	seen := &progressLog{}
	go func() {
		typ, err := w.AwaitServed(ctx, notServed, seen.add)
		ch <- resolved{typ, err}
	}()
	select {
	case r := <-ch:
		t.Fatalf("AwaitServed returned before the CRD was installed: %+v", r)
	case <-time.After(300 * time.Millisecond):
	}
	installCRD(t, twoVersionCRD("doohickeys", "Doohickey", "resolve.vigil.dev"))
	var r resolved
	select {
	case r = <-ch:
	case <-time.After(15 * time.Second):
		t.Fatal("AwaitServed did not return within 15s of the CRD")
	}
	want := waitfor.Type{GVK: schema.GroupVersionKind{Group: "resolve.vigil.dev", Version: "v1", Kind: "Doohickey"}, Resource: "doohickeys", Namespaced: true}
	if r.err != nil || r.typ != want {
		t.Fatalf("AwaitServed = %+v, %v; want %+v", r.typ, r.err, want)
	}
	// The type waits like any other, once discovery has caught up.
	d := &unstructured.Unstructured{}
	d.SetGroupVersionKind(want.GVK)
	d.SetNamespace(ns)
	d.SetName("d1")
	objCh := waitAsync(ctx, w, waitfor.Spec{GVK: want.GVK, Namespace: ns, Name: "d1", Cond: gate.Created()}, nil)
	deadline := time.Now().Add(10 * time.Second)
	for err := env.Client.Create(ctx, d); err != nil; err = env.Client.Create(ctx, d) {
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if res := within(t, objCh, 10*time.Second); res.err != nil || len(res.objs) != 1 || res.objs[0].GetAPIVersion() != "resolve.vigil.dev/v1" {
		t.Fatalf("wait for the Doohickey: %d objects, %v; want d1 in v1", len(res.objs), res.err)
	}
}

// A gate that may not list CRDs waits for a kind not served yet by asking
// discovery again, and says so.
func TestAwaitKindWithoutCRDRights(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Second)
	defer cancel()
	ns := env.Namespace(t)
	gvk := schema.GroupVersionKind{Group: "norights.vigil.dev", Version: "v1", Kind: "Thingy"}
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "thingies"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{gvk.Group}, Resources: []string{"thingies"}, Verbs: []string{"get", "list", "watch"}}},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "thingies"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "thingies"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "gatekeeper"}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	w := newWaiter(t, env.AsServiceAccountConfig(ns, "gatekeeper"))
	seen := &progressLog{}
	ch := waitAsync(ctx, w, waitfor.Spec{GVK: gvk, Namespace: ns, Name: "t1", Cond: gate.Created()}, seen)
	deadline := time.Now().Add(10 * time.Second)
	for !seen.has(waitfor.StateWaitingForType, "cannot list CustomResourceDefinitions (forbidden)") {
		if time.Now().After(deadline) {
			t.Fatalf("progress %s: want a report that CRDs cannot be listed", seen)
		}
		time.Sleep(20 * time.Millisecond)
	}
	notWithin(t, ch, 200*time.Millisecond)
	installCRD(t, twoVersionCRD("thingies", "Thingy", gvk.Group))
	th := &unstructured.Unstructured{}
	th.SetGroupVersionKind(gvk)
	th.SetNamespace(ns)
	th.SetName("t1")
	for err := env.Client.Create(ctx, th); err != nil; err = env.Client.Create(ctx, th) {
		if ctx.Err() != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if r := within(t, ch, 20*time.Second); r.err != nil || len(r.objs) != 1 {
		t.Fatalf("wait without CRD rights: %d objects, %v; want t1", len(r.objs), r.err)
	}
}
