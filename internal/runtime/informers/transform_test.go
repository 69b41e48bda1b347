package informers

import (
	"encoding/json"
	"reflect"
	"runtime"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	toolscache "k8s.io/client-go/tools/cache"
)

// decode is the Pod or metadata of deploymentPod(i) as an informer decodes
// it, managed fields and all.
func decode[T any](t *testing.T, i int, whole bool) *T {
	t.Helper()
	obj := new(T)
	if err := json.Unmarshal(deploymentPod(i, whole), obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

func sameMap[M ~map[K]V, K comparable, V any](a, b M) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

func sameString(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

// The transform leaves every object equal to what was decoded, less its
// managed fields, and makes what two Pods of one ReplicaSet repeat one:
// their labels, owner references, namespace and node share their memory,
// while a Pod of another ReplicaSet keeps labels of its own.
func TestTransformSharesWhatPodsRepeat(t *testing.T) {
	var tf toolscache.TransformFunc
	for _, whole := range []bool{false, true} {
		// A transform of its own each: the Pods have the same UIDs and
		// resourceVersions either way, which one transform takes for the
		// same objects.
		tf = Transform()
		a, b, other := decode[corev1.Pod](t, 1, whole), decode[corev1.Pod](t, 2, whole), decode[corev1.Pod](t, 150, whole)
		a.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}
		want := a.DeepCopy()
		want.ManagedFields = nil
		for _, p := range []*corev1.Pod{a, b, other} {
			if _, err := tf(p); err != nil {
				t.Fatal(err)
			}
		}
		if !reflect.DeepEqual(a, want) {
			t.Errorf("whole=%v: the transformed Pod differs from the decoded one:\n%+v\nwant\n%+v", whole, a, want)
		}
		if !sameMap(a.Labels, b.Labels) || sameMap(a.Labels, other.Labels) {
			t.Errorf("whole=%v: labels shared by two Pods of one ReplicaSet: %v; by Pods of two: %v; want true, false", whole, sameMap(a.Labels, b.Labels), sameMap(a.Labels, other.Labels))
		}
		if &a.OwnerReferences[0] != &b.OwnerReferences[0] {
			t.Errorf("whole=%v: two Pods of one ReplicaSet hold their owner reference apart", whole)
		}
		if !sameString(a.Namespace, b.Namespace) || !sameString(a.GenerateName, b.GenerateName) {
			t.Errorf("whole=%v: two Pods of one ReplicaSet hold their namespace or generateName apart", whole)
		}
		if whole && !sameString(a.Spec.Containers[0].Image, other.Spec.Containers[0].Image) {
			t.Errorf("two Pods of one image hold its name apart")
		}
		if whole && (!sameMap(a.Spec.Containers[0].Resources.Requests, other.Spec.Containers[0].Resources.Requests) || &a.Spec.Tolerations[0] != &other.Spec.Tolerations[0]) {
			t.Errorf("two Pods of equal requests and tolerations hold them apart")
		}
	}
	// Requests that differ are held apart.
	more := decode[corev1.Pod](t, 7, true)
	more.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse("256Mi")
	same := decode[corev1.Pod](t, 8, true)
	for _, p := range []*corev1.Pod{more, same} {
		if _, err := tf(p); err != nil {
			t.Fatal(err)
		}
	}
	if sameMap(more.Spec.Containers[0].Resources.Requests, same.Spec.Containers[0].Resources.Requests) || more.Spec.Containers[0].Resources.Requests.Memory().String() != "256Mi" {
		t.Errorf("requests of 256Mi after the transform: %v, shared with 128Mi's; want their own", more.Spec.Containers[0].Resources.Requests)
	}

	m1, m2 := decode[metav1.PartialObjectMetadata](t, 3, false), decode[metav1.PartialObjectMetadata](t, 4, false)
	want := m1.DeepCopy()
	for _, m := range []*metav1.PartialObjectMetadata{m1, m2} {
		if _, err := tf(m); err != nil {
			t.Fatal(err)
		}
	}
	if !reflect.DeepEqual(m1, want) || !sameMap(m1.Labels, m2.Labels) {
		t.Errorf("metadata: equal %v, labels shared %v; want both", reflect.DeepEqual(m1, want), sameMap(m1.Labels, m2.Labels))
	}

	// What is unstructured is left whole but for its managed fields.
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(deploymentPod(5, true)); err != nil {
		t.Fatal(err)
	}
	u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubelet"}})
	wantU := u.DeepCopy()
	unstructured.RemoveNestedField(wantU.Object, "metadata", "managedFields")
	if _, err := tf(u); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(u, wantU) {
		t.Errorf("an unstructured Pod after the transform:\n%v\nwant\n%v", u.Object, wantU.Object)
	}
}

// What the transform shares stays shared across garbage collections: a Pod
// that comes after one holds the same strings.
func TestTransformSharesAcrossCollections(t *testing.T) {
	tf := Transform()
	a := decode[corev1.Pod](t, 1, true)
	if _, err := tf(a); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.GC()
	b := decode[corev1.Pod](t, 2, true)
	if _, err := tf(b); err != nil {
		t.Fatal(err)
	}
	if !sameString(a.Namespace, b.Namespace) || !sameString(a.Spec.Containers[0].Image, b.Spec.Containers[0].Image) {
		t.Error("two Pods transformed a collection apart hold their namespace or image apart")
	}
	runtime.KeepAlive(a)
}

// A set larger than tableBytes is not remembered, and the table starts over
// once it holds tableEntries sets.
func TestTransformsTableIsBounded(t *testing.T) {
	c := &canon{}
	big := map[string]string{"k": string(make([]byte, tableBytes))}
	if c.stringMap(big); len(c.maps) != 0 {
		t.Errorf("a set of %d bytes was remembered", tableBytes+1)
	}
	for i := range tableEntries + 10 {
		c.stringMap(map[string]string{"i": string(rune('a'+i%26)) + string(rune(i))})
	}
	if len(c.maps) > tableEntries {
		t.Errorf("the table holds %d sets, over its %d", len(c.maps), tableEntries)
	}
}

// The informers of one cache transform their objects at once: one
// transform is safe to call from many goroutines (go test -race).
func TestTransformFromManyInformers(t *testing.T) {
	tf := Transform()
	pods := make([][]*corev1.Pod, 4)
	for g := range pods {
		for i := range 200 {
			pods[g] = append(pods[g], decode[corev1.Pod](t, g*1000+i, true))
		}
	}
	done := make(chan error)
	for _, mine := range pods {
		go func() {
			var err error
			for _, p := range mine {
				if _, e := tf(p); e != nil {
					err = e
				}
			}
			done <- err
		}()
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}
