package informers

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
)

// An object decoded again at the resourceVersion of the one the store holds
// under its key is that one, whatever its type: a relist holds again only
// what changed. A new resourceVersion, or a new object under the same name
// (another UID), is transformed and kept.
func TestReuseHandsBackTheObjectTheStoreHoldsAtItsResourceVersion(t *testing.T) {
	store := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
	transformed := 0
	tf := Reuse(store, func(obj any) (any, error) {
		transformed++
		return Transform()(obj)
	})
	// hold transforms obj and adds it to the store, as an informer does.
	hold := func(obj any) any {
		t.Helper()
		out, err := tf(obj)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Update(out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	configMap := func(rv, uid string) *corev1.ConfigMap {
		return &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "settings", ResourceVersion: rv, UID: types.UID("cm-" + uid)},
			Data:       map[string]string{"mode": "strict"},
		}
	}
	unstructuredPod := func(i int) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(deploymentPod(i, true)); err != nil {
			t.Fatal(err)
		}
		return u
	}
	for _, c := range []struct {
		kind          string
		first, again  func() any
		changed, anew func() any
	}{
		{"a Pod", func() any { return decode[corev1.Pod](t, 1, true) }, func() any { return decode[corev1.Pod](t, 1, true) },
			func() any { p := decode[corev1.Pod](t, 1, true); p.ResourceVersion += "0"; return p },
			func() any { p := decode[corev1.Pod](t, 1, true); p.ResourceVersion += "0"; p.UID += "0"; return p }},
		{"metadata", func() any { return decode[metav1.PartialObjectMetadata](t, 2, false) }, func() any { return decode[metav1.PartialObjectMetadata](t, 2, false) },
			func() any { p := decode[metav1.PartialObjectMetadata](t, 2, false); p.ResourceVersion += "0"; return p },
			func() any {
				p := decode[metav1.PartialObjectMetadata](t, 2, false)
				p.ResourceVersion += "0"
				p.UID += "0"
				return p
			}},
		{"an unstructured object", func() any { return unstructuredPod(3) }, func() any { return unstructuredPod(3) },
			func() any { u := unstructuredPod(3); u.SetResourceVersion("7"); return u },
			func() any { u := unstructuredPod(3); u.SetResourceVersion("7"); u.SetUID("other"); return u }},
		{"a ConfigMap", func() any { return configMap("5", "1") }, func() any { return configMap("5", "1") },
			func() any { return configMap("6", "1") }, func() any { return configMap("6", "2") }},
	} {
		first := hold(c.first())
		before := transformed
		if got := hold(c.again()); got != first {
			t.Errorf("%s decoded again at its resourceVersion: a new object; want the one the store holds", c.kind)
		}
		if transformed != before {
			t.Errorf("%s decoded again at its resourceVersion went through the transform; want it handed back untouched", c.kind)
		}
		changed := hold(c.changed())
		if changed == first {
			t.Errorf("%s at a new resourceVersion: got the one held; want the new one", c.kind)
		}
		if transformed != before+1 {
			t.Errorf("%s at a new resourceVersion: transformed %d times, want once", c.kind, transformed-before)
		}
		if got := hold(c.anew()); got == changed {
			t.Errorf("%s created again under its name (another UID): got the one held; want the new one", c.kind)
		}
	}
	// What is not an object, as a deleted object whose last state is
	// unknown, passes through.
	tomb := toolscache.DeletedFinalStateUnknown{Key: "team-a/settings"}
	if out, err := tf(tomb); err != nil || out != any(tomb) {
		t.Errorf("a tombstone: got %v, %v; want it unchanged", out, err)
	}
}
