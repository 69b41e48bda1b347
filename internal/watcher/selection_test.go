package watcher

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/vigilkit/vigil/internal/spec"
)

var (
	cmGVK  = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	podGVK = schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
)

func user(gvk schema.GroupVersionKind, sel spec.Selection) spec.Lister {
	return spec.Lister{GVK: gvk, New: func() client.Object { return &corev1.ConfigMap{} }, Select: sel}
}

// The server selects only what every user of a type agrees on.
func TestAgree(t *testing.T) {
	for _, tc := range []struct {
		name  string
		users []spec.Lister
		want  Agreed
	}{
		{"one user keeps its selection", []spec.Lister{user(cmGVK, spec.Selection{Namespaces: []string{"b", "a"}, Labels: "app=web", Name: "x"})},
			Agreed{Namespaces: []string{"a", "b"}, Labels: "app=web", Name: "x"}},
		{"namespaces are united when all are limited", []spec.Lister{user(cmGVK, spec.Selection{Namespaces: []string{"a"}}), user(cmGVK, spec.Selection{Namespaces: []string{"b", "a"}})},
			Agreed{Namespaces: []string{"a", "b"}}},
		{"one cluster-wide user makes the informer cluster-wide", []spec.Lister{user(cmGVK, spec.Selection{Namespaces: []string{"a"}}), user(cmGVK, spec.Selection{})},
			Agreed{}},
		{"labels only when equal", []spec.Lister{user(cmGVK, spec.Selection{Labels: "app=web"}), user(cmGVK, spec.Selection{Labels: "app=db"})},
			Agreed{}},
		{"equal labels go to the server", []spec.Lister{user(cmGVK, spec.Selection{Labels: "app=web"}), user(cmGVK, spec.Selection{Labels: "app=web"})},
			Agreed{Labels: "app=web"}},
		{"a lister sees everything", []spec.Lister{user(cmGVK, spec.Selection{Name: "x", Labels: "a"}), user(cmGVK, spec.Selection{})},
			Agreed{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Agree(tc.users)
			if len(got) != 1 {
				t.Fatalf("got %d informers, want 1", len(got))
			}
			g := got[0]
			if strings.Join(g.Namespaces, ",") != strings.Join(tc.want.Namespaces, ",") || g.Labels != tc.want.Labels || g.Name != tc.want.Name {
				t.Fatalf("got %+v, want %+v", g, tc.want)
			}
		})
	}
	if got := Agree([]spec.Lister{user(podGVK, spec.Selection{}), user(cmGVK, spec.Selection{}), user(podGVK, spec.Selection{})}); len(got) != 2 || got[0].GVK.Kind != "ConfigMap" {
		t.Fatalf("one informer per type, sorted: got %+v", got)
	}
}

func TestByObjectTurnsAgreementIntoCacheOptions(t *testing.T) {
	by, err := ByObject([]Agreed{{GVK: cmGVK, New: func() client.Object { return &corev1.ConfigMap{} }, Namespaces: []string{"a"}, Labels: "app=web,tier", Name: "x"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range by {
		if _, ok := o.Namespaces["a"]; !ok || len(o.Namespaces) != 1 {
			t.Errorf("namespaces: %v", o.Namespaces)
		}
		if o.Label.String() != "app=web,tier" || o.Field.String() != "metadata.name=x" {
			t.Errorf("selectors: label %q field %q", o.Label, o.Field)
		}
	}
	if _, err := ByObject([]Agreed{{GVK: cmGVK, New: func() client.Object { return &corev1.ConfigMap{} }, Labels: "a==b==c"}}); err == nil {
		t.Error("a bad label selector was accepted")
	}
}

func TestLabelSelectorIsCanonical(t *testing.T) {
	web := "web"
	if got := LabelSelector(map[string]*string{"tier": nil, "app": &web}); got != "app=web,tier" {
		t.Fatalf("got %q", got)
	}
}

func TestFinalizerNamesAreQualifiedAndShort(t *testing.T) {
	f := Finalizer("uds-core", "policies", strings.Repeat("x", 80))
	prefix, name, ok := strings.Cut(f, "/")
	if !ok || prefix != "uds-core.vigil.dev" || len(name) > 63 {
		t.Fatalf("finalizer %q: want prefix uds-core.vigil.dev and a name of 63 characters at most", f)
	}
	if !strings.HasPrefix(f, FinalizerPrefix("uds-core")) {
		t.Fatalf("finalizer %q lacks the module's prefix", f)
	}
}

// Changes to an object reconciled a moment ago wait out the spacing; others
// are queued at once.
func TestSpacingDelaysOnlyRecentlyReconciledObjects(t *testing.T) {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	s := newSpacing(300 * time.Millisecond)
	fresh := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "fresh"}}
	hot := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "hot"}}
	s.started(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(hot)}.NamespacedName)
	s.enqueue(fresh, q, false)
	s.enqueue(hot, q, false)
	if q.Len() != 1 {
		t.Fatalf("queue holds %d; want only the fresh object at once", q.Len())
	}
	item, _ := q.Get()
	q.Done(item)
	if item.Name != "fresh" {
		t.Fatalf("got %s first", item.Name)
	}
	start := time.Now()
	item, _ = q.Get()
	if item.Name != "hot" || time.Since(start) < 200*time.Millisecond {
		t.Fatalf("the hot object came after %s; want about 300ms", time.Since(start))
	}
}
