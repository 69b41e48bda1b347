package define_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/internal/callctx"
	"github.com/vigilkit/vigil/internal/define"
	"github.com/vigilkit/vigil/internal/fresh"
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

func source(r client.Reader, barriers fresh.Set) *define.ListerSource {
	gvk := corev1.SchemeGroupVersion.WithKind("ConfigMap")
	s := &define.ListerSource{
		GVK:     gvk,
		New:     func() client.Object { return &corev1.ConfigMap{} },
		NewList: func() client.ObjectList { return &corev1.ConfigMapList{} },
	}
	s.Use(r, barriers)
	return s
}

// A read by key goes to the cache's index (its Get), never through a list
// of everything it holds.
func TestAListerReadByKeyIsIndexed(t *testing.T) {
	r := &countingReader{}
	s := source(r, nil)
	if _, err := s.Get(t.Context(), "apps", "cfg"); err != nil {
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
	s := source(&countingReader{}, fresh.Set{gvk: b})

	miss := &fresh.Reads{}
	if _, err := s.Get(callctx.WithReads(t.Context(), miss), "apps", "other"); !apierrors.IsNotFound(err) {
		t.Fatalf("Get of a missing object: %v, want NotFound", err)
	}
	if !miss.Read() || miss.Found() || len(miss.Barriers()) != 1 || miss.Barriers()[0] != b {
		t.Fatalf("after a miss: read %v found %v barriers %v, want true false [the ConfigMap barrier]", miss.Read(), miss.Found(), miss.Barriers())
	}
	hit := &fresh.Reads{}
	if _, err := s.List(callctx.WithReads(t.Context(), hit)); err != nil {
		t.Fatal(err)
	}
	if !hit.Found() {
		t.Fatal("a List that returned an object was not recorded as found")
	}
	// Outside a binding's run nothing is recorded, and nothing breaks.
	if _, err := s.Get(t.Context(), "apps", "cfg"); err != nil {
		t.Fatal(err)
	}
}
