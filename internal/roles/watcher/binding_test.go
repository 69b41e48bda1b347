package watcher

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Only a change of nothing but the module's own finalizers is the module's
// own doing; any other change, another finalizer among them, is not.
func TestOwnFinalizersAreTheModulesOnly(t *testing.T) {
	cm := func(finalizers []string, labels map[string]string, rv string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", Finalizers: finalizers, Labels: labels, ResourceVersion: rv}}
	}
	own := "mod.vigil.dev/cap.binding"
	for name, tc := range map[string]struct {
		old, obj *corev1.ConfigMap
		want     bool
	}{
		"added":            {cm(nil, nil, "1"), cm([]string{own}, nil, "2"), true},
		"removed":          {cm([]string{"x", own}, nil, "1"), cm([]string{"x"}, nil, "2"), true},
		"another's":        {cm(nil, nil, "1"), cm([]string{"example.dev/x"}, nil, "2"), false},
		"and a label":      {cm(nil, nil, "1"), cm([]string{own}, map[string]string{"a": "b"}, "2"), false},
		"no finalizer":     {cm(nil, nil, "1"), cm(nil, map[string]string{"a": "b"}, "2"), false},
		"another module's": {cm(nil, nil, "1"), cm([]string{"other.vigil.dev/cap.binding"}, nil, "2"), false},
	} {
		if got := ownFinalizers("mod", tc.old, tc.obj); got != tc.want {
			t.Errorf("%s: ownFinalizers = %v, want %v", name, got, tc.want)
		}
	}
}
