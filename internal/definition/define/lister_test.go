package define_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/internal/definition/define"
	"github.com/vigilkit/vigil/internal/runtime/callctx"
	"github.com/vigilkit/vigil/internal/serving/fresh"
)

// countingReader is a cache that holds one ConfigMap, apps/cfg, and counts
// how it is read.
type countingReader struct{ gets, lists int }

func (r *countingReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	r.gets++
	if key != (client.ObjectKey{Namespace: "apps", Name: "cfg"}) {
		return apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, key.Name)
	}
	obj.SetNamespace("apps")
	obj.SetName("cfg")
	return nil
}

func (r *countingReader) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	r.lists++
	list.(*corev1.ConfigMapList).Items = []corev1.ConfigMap{{}}
	return nil
}

// source is a ConfigMap lister's source, and the context of a handler of a
// role whose cache is r, with these barriers.
func source(t *testing.T, r client.Reader, barriers fresh.Set) (*define.ListerSource, context.Context) {
	gvk := corev1.SchemeGroupVersion.WithKind("ConfigMap")
	s := &define.ListerSource{
		GVK:     gvk,
		New:     func() client.Object { return &corev1.ConfigMap{} },
		NewList: func() client.ObjectList { return &corev1.ConfigMapList{} },
	}
	role := &callctx.Role{}
	role.SetCache(r, barriers)
	return s, callctx.With(t.Context(), role, nil)
}

// A read by key goes to the cache's index (its Get), never through a list
// of everything it holds.
func TestAListerReadByKeyIsIndexed(t *testing.T) {
	r := &countingReader{}
	s, ctx := source(t, r, nil)
	if _, err := s.Get(ctx, "apps", "cfg"); err != nil {
		t.Fatal(err)
	}
	if r.gets != 1 || r.lists != 0 {
		t.Fatalf("Get made %d gets and %d lists of the cache, want 1 get and no list", r.gets, r.lists)
	}
}

// Within an admission binding's run, every read is recorded with its type's
// barrier and whether it found an object.
func TestListerReadsAreRecorded(t *testing.T) {
	gvk := corev1.SchemeGroupVersion.WithKind("ConfigMap")
	b := fresh.NewBarrier("ConfigMap", nil)
	s, ctx := source(t, &countingReader{}, fresh.Set{{GVK: gvk}: b})

	miss := &fresh.Reads{}
	if _, err := s.Get(callctx.WithReads(ctx, miss), "apps", "other"); !apierrors.IsNotFound(err) {
		t.Fatalf("Get of a missing object: %v, want NotFound", err)
	}
	want := []fresh.Read{{Barrier: b, Scope: fresh.Scope{Namespace: "apps", Name: "other"}}}
	if !miss.Read() || miss.Found() || !slices.Equal(miss.All(), want) {
		t.Fatalf("after a miss: read %v found %v reads %+v, want true false %+v (the key read, in the ConfigMap barrier)", miss.Read(), miss.Found(), miss.All(), want)
	}
	hit := &fresh.Reads{}
	if _, err := s.List(callctx.WithReads(ctx, hit), client.InNamespace("apps"), client.MatchingLabels{"team": "shop"}, client.MatchingFields{"spec.x": "y"}); err != nil {
		t.Fatal(err)
	}
	// A list's scope is its namespace and labels; a field selector, which
	// the cache may serve from an index of its own, is not part of it.
	want = []fresh.Read{{Barrier: b, Scope: fresh.Scope{Namespace: "apps", Labels: "team=shop"}}}
	if !hit.Found() || !slices.Equal(hit.All(), want) {
		t.Fatalf("a List that returned an object: found %v reads %+v, want true %+v", hit.Found(), hit.All(), want)
	}
	// Outside a binding's run nothing is recorded, and nothing breaks.
	if _, err := s.Get(ctx, "apps", "cfg"); err != nil {
		t.Fatal(err)
	}
}

// A lister reads the cache of the role whose handler reads it, from the
// handler's context: outside one, or in a role that started no cache, it is
// not started; two roles' handlers read their own caches.
func TestAListerReadsTheCacheOfTheRoleInItsContext(t *testing.T) {
	first, second := &countingReader{}, &countingReader{}
	s, ctx := source(t, first, nil)
	_, other := source(t, second, nil)
	for _, c := range []context.Context{t.Context(), callctx.With(t.Context(), &callctx.Role{}, nil)} {
		if _, err := s.Get(c, "apps", "cfg"); err == nil || !strings.Contains(err.Error(), "lister of ConfigMap is not started") {
			t.Fatalf("Get without a role's cache: %v, want the lister not started", err)
		}
	}
	if _, err := s.Get(ctx, "apps", "cfg"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.List(other); err != nil {
		t.Fatal(err)
	}
	if first.gets != 1 || first.lists != 0 || second.gets != 0 || second.lists != 1 {
		t.Fatalf("caches read: first %d gets %d lists, second %d gets %d lists; want each role's handler to read its own (1 0, 0 1)", first.gets, first.lists, second.gets, second.lists)
	}
}

// A kind read whole and as metadata has an informer each way, and a read
// waits on the barrier of the informer it reads: the whole lister's
// recheck never waits on the metadata informer instead.
func TestAListerWaitsOnTheBarrierOfItsOwnInformer(t *testing.T) {
	gvk := corev1.SchemeGroupVersion.WithKind("ConfigMap")
	whole, meta := fresh.NewBarrier("ConfigMap", nil), fresh.NewBarrier("ConfigMap metadata", nil)
	set := fresh.Set{{GVK: gvk}: whole, {GVK: gvk, Metadata: true}: meta}
	s, ctx := source(t, &countingReader{}, set)
	ms, _ := source(t, &countingReader{}, set)
	ms.Metadata = true
	for _, tc := range []struct {
		name string
		src  *define.ListerSource
		want *fresh.Barrier
	}{{"whole", s, whole}, {"metadata", ms, meta}} {
		reads := &fresh.Reads{}
		if _, err := tc.src.Get(callctx.WithReads(ctx, reads), "apps", "cfg"); err != nil {
			t.Fatal(err)
		}
		if got := reads.All(); len(got) != 1 || got[0].Barrier != tc.want {
			t.Errorf("the %s lister's read noted barriers %v, want only its own informer's", tc.name, got)
		}
	}
}
