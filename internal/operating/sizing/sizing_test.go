package sizing

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The heap an object takes is measured, not guessed: a ConfigMap holding
// 64 KiB takes about 64 KiB whole, as typed or unstructured, and a few
// hundred bytes as metadata, however few of them there are.
func TestHeapPerMeasuresWhatTheInformerHolds(t *testing.T) {
	var raw [][]byte
	for i := range 40 {
		cm := &corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: fmt.Sprintf("cm-%02d", i), Labels: map[string]string{"app": "shop"}},
			Data:       map[string]string{"blob": strings.Repeat("x", 64<<10)},
		}
		data, err := json.Marshal(cm)
		if err != nil {
			t.Fatal(err)
		}
		raw = append(raw, data)
	}
	for _, tc := range []struct {
		name     string
		new      func() client.Object
		min, max int64
	}{
		{"typed", func() client.Object { return &corev1.ConfigMap{} }, 60 << 10, 80 << 10},
		{"unstructured", func() client.Object { return &unstructured.Unstructured{} }, 60 << 10, 90 << 10},
		{"metadata", func() client.Object { return &metav1.PartialObjectMetadata{} }, 100, 4 << 10},
	} {
		got, err := heapPer(raw, tc.new)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d bytes an object", tc.name, got)
		if got < tc.min || got > tc.max {
			t.Errorf("%s: %d bytes an object, want %d to %d", tc.name, got, tc.min, tc.max)
		}
	}
}
