package waitfor_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/gate"
	"github.com/vigilkit/vigil/internal/runtime/waitfor"
	"github.com/vigilkit/vigil/internal/testsupport/testkit"
	"github.com/vigilkit/vigil/vigiltest"
	"github.com/vigilkit/vigil/vigiltest/fault"
)

var env *vigiltest.Env

func TestMain(m *testing.M) {
	os.Exit(vigiltest.Run(m, vigiltest.Options{}, &env))
}

var configMapGVK = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}

func newWaiter(t testing.TB, cfg *rest.Config) *waitfor.Waiter {
	t.Helper()
	w, err := waitfor.New(cfg, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// waitAsync runs a wait in the background and returns a channel with its result.
type result struct {
	objs []*unstructured.Unstructured
	err  error
	at   time.Time
}

func waitAsync(ctx context.Context, w *waitfor.Waiter, spec waitfor.Spec, seen *progressLog) <-chan result {
	ch := make(chan result, 1)
	go func() {
		objs, err := w.Wait(ctx, spec, seen.add)
		ch <- result{objs, err, time.Now()}
	}()
	return ch
}

type progressLog struct {
	mu  sync.Mutex
	all []waitfor.Progress
}

func (p *progressLog) add(pr waitfor.Progress) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.all = append(p.all, pr)
	p.mu.Unlock()
}

func (p *progressLog) has(state, seenPart string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pr := range p.all {
		if pr.State == state && strings.Contains(pr.Seen, seenPart) {
			return true
		}
	}
	return false
}

func (p *progressLog) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return fmt.Sprint(p.all)
}

func within(t *testing.T, ch <-chan result, d time.Duration) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(d):
		t.Fatalf("wait did not return within %s", d)
		return result{}
	}
}

func notWithin(t *testing.T, ch <-chan result, d time.Duration) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("wait returned early: %d objects, err %v", len(r.objs), r.err)
	case <-time.After(d):
	}
}

func cm(ns, name string, lbls map[string]string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls}, Data: data}
}

// An object that exists already satisfies the wait after the first list.
func TestSatisfiedAtOnce(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	if err := env.Client.Create(ctx, cm(ns, "there", nil, nil)); err != nil {
		t.Fatal(err)
	}
	w := newWaiter(t, env.Config)
	began := time.Now()
	objs, err := w.Wait(ctx, waitfor.Spec{GVK: configMapGVK, Namespace: ns, Name: "there", Cond: gate.Created()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 || objs[0].GetName() != "there" {
		t.Fatalf("objects %v, want the ConfigMap", objs)
	}
	t.Logf("satisfied wait returned in %s", time.Since(began))
}

// A wait that starts first returns when the object is created, reporting
// "not found" meanwhile.
func TestCreatedAfterWaitStarts(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	w := newWaiter(t, env.Config)
	seen := &progressLog{}
	ch := waitAsync(ctx, w, waitfor.Spec{GVK: configMapGVK, Namespace: ns, Name: "later", Cond: gate.Created()}, seen)
	notWithin(t, ch, 300*time.Millisecond)
	if err := env.Client.Create(ctx, cm(ns, "later", nil, nil)); err != nil {
		t.Fatal(err)
	}
	created := time.Now()
	r := within(t, ch, 10*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Logf("reaction %s after create", r.at.Sub(created))
	if !seen.has("not found", "") {
		t.Fatalf("progress %s: want a not-found report while waiting", seen)
	}
}

// Deleted is by UID: a wait started while the object exists returns when it
// is deleted, even if another object of that name takes its place.
func TestDeletedByUID(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	if err := env.Client.Create(ctx, cm(ns, "doomed", nil, nil)); err != nil {
		t.Fatal(err)
	}
	w := newWaiter(t, env.Config)
	ch := waitAsync(ctx, w, waitfor.Spec{GVK: configMapGVK, Namespace: ns, Name: "doomed", Cond: gate.Gone()}, nil)
	notWithin(t, ch, 300*time.Millisecond)
	if err := env.Client.Delete(ctx, cm(ns, "doomed", nil, nil)); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, cm(ns, "doomed", nil, nil)); err != nil {
		t.Fatal(err)
	}
	if r := within(t, ch, 10*time.Second); r.err != nil {
		t.Fatal(r.err)
	}
}

// A wait sees every write made before it began: its first read of the
// objects is consistent, never resourceVersion "0", which the API server may
// answer from a watch cache a write behind. Where WatchList is served (1.37)
// the first read is a stream from the latest resourceVersion; where it is not
// (1.33) it is a list at the latest one. Each of ten waits begins right after
// the object left the state it waits for, and none may pass on that state.
func TestAWaitSeesWhatWasWrittenBeforeIt(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	obj := cm(ns, "flips", nil, map[string]string{"mode": "ready"})
	if err := env.Client.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
	cfg, reads := testkit.RecordReads(env.Config, "/namespaces/"+ns+"/configmaps")
	w := newWaiter(t, cfg)
	for i := range 10 {
		obj.Data["mode"] = fmt.Sprint("starting-", i)
		if err := env.Client.Update(ctx, obj); err != nil {
			t.Fatal(err)
		}
		reads.Reset()
		ch := waitAsync(ctx, w, waitfor.Spec{GVK: configMapGVK, Namespace: ns, Name: "flips", Cond: gate.JSONPath("{.data.mode}", "ready")}, nil)
		notWithin(t, ch, 150*time.Millisecond)
		obj.Data["mode"] = "ready"
		if err := env.Client.Update(ctx, obj); err != nil {
			t.Fatal(err)
		}
		if r := within(t, ch, 10*time.Second); r.err != nil || len(r.objs) != 1 {
			t.Fatalf("wait %d: result %+v", i, r)
		}
		// Checked once the wait is done, so that a loaded machine's late
		// first read is checked too.
		if why := reads.NotConsistent(); why != "" {
			t.Fatalf("wait %d: %s", i, why)
		}
	}
}

// Conditions on content: JSONPath and CEL, level-driven through updates.
func TestConditionsOnContent(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	obj := cm(ns, "settings", nil, map[string]string{"mode": "starting"})
	if err := env.Client.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
	w := newWaiter(t, env.Config)
	for _, tc := range []struct {
		name string
		cond gate.Cond
	}{
		{"jsonpath", gate.JSONPath("{.data.mode}", "ready")},
		{"cel", gate.CEL(`object.data.mode == "ready"`)},
		{"and", gate.And(gate.Created(), gate.JSONPath("{.data.mode}", "ready"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj.Data["mode"] = "starting"
			if err := env.Client.Update(ctx, obj); err != nil {
				t.Fatal(err)
			}
			seen := &progressLog{}
			ch := waitAsync(ctx, w, waitfor.Spec{GVK: configMapGVK, Namespace: ns, Name: "settings", Cond: tc.cond}, seen)
			notWithin(t, ch, 300*time.Millisecond)
			obj.Data["mode"] = "ready"
			if err := env.Client.Update(ctx, obj); err != nil {
				t.Fatal(err)
			}
			if r := within(t, ch, 10*time.Second); r.err != nil || len(r.objs) != 1 {
				t.Fatalf("result %+v", r)
			}
			if !seen.has("not matching", "") {
				t.Fatalf("progress %s: want a not-matching report before the update", seen)
			}
		})
	}
}

// Selectors over many objects: any, all, at least N.
func TestSelectorModes(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	w := newWaiter(t, env.Config)
	sel := labels.SelectorFromSet(labels.Set{"app": "shop"})
	ready := gate.JSONPath("{.data.ready}", "yes")
	for i := range 3 {
		if err := env.Client.Create(ctx, cm(ns, fmt.Sprint("shop-", i), map[string]string{"app": "shop"}, map[string]string{"ready": "no"})); err != nil {
			t.Fatal(err)
		}
	}
	// An unlabelled object that is ready must not count.
	if err := env.Client.Create(ctx, cm(ns, "other", nil, map[string]string{"ready": "yes"})); err != nil {
		t.Fatal(err)
	}
	any := waitAsync(ctx, w, waitfor.Spec{GVK: configMapGVK, Namespace: ns, Labels: sel, Cond: ready, Mode: waitfor.Any}, nil)
	atLeast := waitAsync(ctx, w, waitfor.Spec{GVK: configMapGVK, Namespace: ns, Labels: sel, Cond: ready, Mode: waitfor.AtLeast, N: 2}, nil)
	seenAll := &progressLog{}
	all := waitAsync(ctx, w, waitfor.Spec{GVK: configMapGVK, Namespace: ns, Labels: sel, Cond: ready, Mode: waitfor.All}, seenAll)
	notWithin(t, any, 300*time.Millisecond)
	setReady := func(name string) {
		c := &corev1.ConfigMap{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, c); err != nil {
			t.Fatal(err)
		}
		c.Data["ready"] = "yes"
		if err := env.Client.Update(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	setReady("shop-0")
	if r := within(t, any, 10*time.Second); r.err != nil || len(r.objs) != 1 || r.objs[0].GetName() != "shop-0" {
		t.Fatalf("any: %+v", r)
	}
	notWithin(t, atLeast, 200*time.Millisecond)
	setReady("shop-1")
	if r := within(t, atLeast, 10*time.Second); r.err != nil || len(r.objs) != 2 {
		t.Fatalf("at least 2: %+v", r)
	}
	notWithin(t, all, 200*time.Millisecond)
	if !seenAll.has("not matching", "2 of 3 match") {
		t.Fatalf("all: progress %s, want it to say 2 of 3 match", seenAll)
	}
	setReady("shop-2")
	if r := within(t, all, 10*time.Second); r.err != nil || len(r.objs) != 3 {
		t.Fatalf("all: %+v", r)
	}
}

const gadgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.waitfor.vigil.dev
spec:
  group: waitfor.vigil.dev
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget, listKind: GadgetList}
  versions:
    - name: v1
      served: true
      storage: true
      subresources: {status: {}}
      schema:
        openAPIV3Schema:
          type: object
          x-kubernetes-preserve-unknown-fields: true
`

// A kind whose CRD is installed only after the wait starts is waited for,
// then the object; Established and Condition see the CRD and the object.
func TestCRDInstalledAfterWaitStarts(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	w := newWaiter(t, env.Config)
	gvk := schema.GroupVersionKind{Group: "waitfor.vigil.dev", Version: "v1", Kind: "Gadget"}
	seen := &progressLog{}
	objCh := waitAsync(ctx, w, waitfor.Spec{GVK: gvk, Namespace: ns, Name: "g1", Cond: gate.Condition("Ready", metav1.ConditionTrue)}, seen)
	crdCh := waitAsync(ctx, w, waitfor.Spec{
		GVK:  apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"),
		Name: "gadgets.waitfor.vigil.dev", Cond: gate.Established(),
	}, nil)
	notWithin(t, objCh, 500*time.Millisecond)
	if !seen.has("waiting for type", "not served yet") {
		t.Fatalf("progress %s: want a report that the kind is not served yet", seen)
	}
	crds, err := vigiltest.DecodeCRDs([]byte(gadgetCRD))
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, crds[0]); err != nil {
		t.Fatal(err)
	}
	if r := within(t, crdCh, 10*time.Second); r.err != nil {
		t.Fatal(r.err)
	}
	g := &unstructured.Unstructured{}
	g.SetGroupVersionKind(gvk)
	g.SetNamespace(ns)
	g.SetName("g1")
	// The CRD may be Established before this client's mapping knows it.
	deadline := time.Now().Add(10 * time.Second)
	for err := env.Client.Create(ctx, g); err != nil; err = env.Client.Create(ctx, g) {
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	notWithin(t, objCh, 300*time.Millisecond)
	// A stale Ready=True (observedGeneration behind) does not count.
	setStatus := func(observed int64) {
		cur := &unstructured.Unstructured{}
		cur.SetGroupVersionKind(gvk)
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(g), cur); err != nil {
			t.Fatal(err)
		}
		_ = unstructured.SetNestedSlice(cur.Object, []any{map[string]any{
			"type": "Ready", "status": "True", "reason": "Done", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z",
			"observedGeneration": observed,
		}}, "status", "conditions")
		if err := env.Client.Status().Update(ctx, cur); err != nil {
			t.Fatal(err)
		}
	}
	// A spec change makes generation 2; Ready=True observed at generation 1
	// is stale and does not count.
	cur := &unstructured.Unstructured{}
	cur.SetGroupVersionKind(gvk)
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(g), cur); err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(cur.Object, "v2", "spec", "version")
	if err := env.Client.Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
	if cur.GetGeneration() != 2 {
		t.Fatalf("generation %d after a spec change, want 2", cur.GetGeneration())
	}
	setStatus(1)
	notWithin(t, objCh, 300*time.Millisecond)
	setStatus(2)
	if r := within(t, objCh, 10*time.Second); r.err != nil {
		t.Fatal(r.err)
	}
}

// A kind in a built-in group that is not served is a mistake, not a wait.
func TestUnservableKind(t *testing.T) {
	w := newWaiter(t, env.Config)
	_, err := w.Wait(t.Context(), waitfor.Spec{GVK: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMapp"}, Name: "x", Cond: gate.Created()}, nil)
	if !errors.Is(err, waitfor.ErrNotServable) || !strings.Contains(err.Error(), "check the kind") {
		t.Fatalf("err = %v, want ErrNotServable", err)
	}
}

// Too little RBAC ends the wait with the rule to add.
func TestForbiddenNamesTheRule(t *testing.T) {
	ns := env.Namespace(t)
	w := newWaiter(t, env.AsServiceAccountConfig(ns, "gatekeeper"))
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	_, err := w.Wait(ctx, waitfor.Spec{GVK: configMapGVK, Namespace: ns, Name: "cfg", Cond: gate.Created()}, nil)
	if !errors.Is(err, waitfor.ErrForbidden) {
		t.Fatalf("err = %v, want ErrForbidden", err)
	}
	for _, want := range []string{`in namespace "` + ns + `"`, `resources: ["configmaps"]`, "verbs: [get, list, watch]", `resourceNames: ["cfg"]`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err = %q, want it to contain %q", err, want)
		}
	}
	// With exactly that rule the same wait works.
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gate"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}, ResourceNames: []string{"cfg"}}},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gate"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "gate"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "gatekeeper"}},
	}
	for _, o := range []client.Object{role, binding, cm(ns, "cfg", nil, nil)} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	for {
		_, err = w.Wait(ctx, waitfor.Spec{GVK: configMapGVK, Namespace: ns, Name: "cfg", Cond: gate.Created()}, nil)
		if !errors.Is(err, waitfor.ErrForbidden) {
			break
		}
		time.Sleep(100 * time.Millisecond) // the authorizer catches up with the binding
	}
	if err != nil {
		t.Fatalf("wait with the named rule: %v", err)
	}
}

// An API server outage in the middle of a wait: the wait resumes and sees the
// object created while it was cut off.
func TestOutageMidWait(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	proxy, err := fault.NewProxy(env.Config, fault.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	w := newWaiter(t, proxy.Config())
	ch := waitAsync(ctx, w, waitfor.Spec{GVK: configMapGVK, Namespace: ns, Name: "after-outage", Cond: gate.Created()}, nil)
	notWithin(t, ch, 500*time.Millisecond)
	if n := proxy.Outage(2 * time.Second); n == 0 {
		t.Fatal("the outage cut no connection: the wait was not watching through the proxy")
	}
	if err := env.Client.Create(ctx, cm(ns, "after-outage", nil, nil)); err != nil {
		t.Fatal(err)
	}
	if r := within(t, ch, 30*time.Second); r.err != nil {
		t.Fatal(r.err)
	}
}

// With the watch cache off and etcd compacted during an outage, the resumed
// watch meets 410 Gone; the wait relists and still sees the final state.
func TestGoneMidWait(t *testing.T) {
	gone, err := vigiltest.Start(vigiltest.Options{DisableWatchCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gone.Stop() })
	ctx := t.Context()
	ns := gone.Namespace(t)
	proxy, err := fault.NewProxy(gone.Config, fault.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	obj := cm(ns, "settings", nil, map[string]string{"mode": "0"})
	if err := gone.Client.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
	w := newWaiter(t, proxy.Config())
	ch := waitAsync(ctx, w, waitfor.Spec{GVK: configMapGVK, Namespace: ns, Name: "settings", Cond: gate.JSONPath("{.data.mode}", "final")}, nil)
	// client-go relists at once after a watch that lasted under a second; an
	// older one it resumes from its resourceVersion, which is what meets 410.
	notWithin(t, ch, 1500*time.Millisecond)
	proxy.Outage(2 * time.Second)
	for i := 1; i <= 5; i++ {
		obj.Data["mode"] = fmt.Sprint(i)
		if err := gone.Client.Update(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	obj.Data["mode"] = "final"
	if err := gone.Client.Update(ctx, obj); err != nil {
		t.Fatal(err)
	}
	if _, err := gone.CompactEtcd(ctx); err != nil {
		t.Fatal(err)
	}
	if r := within(t, ch, 30*time.Second); r.err != nil || len(r.objs) != 1 {
		t.Fatalf("result %+v", r)
	}
	if w.Gone() == 0 {
		t.Fatal("the resumed watch never met 410 Gone, so the relist after it was not exercised")
	}
}

func TestDescribe(t *testing.T) {
	for _, tc := range []struct {
		spec waitfor.Spec
		want string
	}{
		{waitfor.Spec{GVK: apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"), Name: "clusterconfigs.uds.dev", Cond: gate.Established()},
			"CustomResourceDefinition.apiextensions.k8s.io clusterconfigs.uds.dev: " + gate.Established().String()},
		{waitfor.Spec{GVK: configMapGVK, Namespace: "apps", Labels: labels.SelectorFromSet(labels.Set{"app": "x"}), Mode: waitfor.AtLeast, N: 2, Cond: gate.Created()},
			"ConfigMap (at least 2, labels app=x, in apps): " + gate.Created().String()},
	} {
		if got := tc.spec.Describe(); got != tc.want {
			t.Errorf("Describe() = %q, want %q", got, tc.want)
		}
	}
}
