package scheme

import (
	"reflect"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// eagerScheme is what the default scheme was before its groups were
// registered lazily, and what it must still resolve.
func eagerScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// The completed default scheme knows exactly the types of client-go's scheme
// and apiextensions/v1: defaultGroups misses no group of client-go's and
// adds none.
func TestDefaultSchemeCompleted(t *testing.T) {
	want := eagerScheme(t).AllKnownTypes()
	s := New()
	if n := len(s.AllKnownTypes()); n != 0 {
		t.Fatalf("a new default scheme has %d types registered, want none until they are needed", n)
	}
	Complete(s)
	got := s.AllKnownTypes()
	for gvk, typ := range want {
		if got[gvk] != typ {
			t.Errorf("%s: completed default scheme has %v, want %v", gvk, got[gvk], typ)
		}
	}
	for gvk := range got {
		if _, ok := want[gvk]; !ok {
			t.Errorf("%s: registered by the completed default scheme, not by client-go's scheme and apiextensions/v1", gvk)
		}
	}
}

// Every object type of the default groups resolves, in a fresh default
// scheme, to the kind it resolves to when every group is registered; its list
// type is registered with it, as a Lister needs.
func TestDefaultSchemeResolvesLazily(t *testing.T) {
	eager := eagerScheme(t)
	byPkg := map[string][]reflect.Type{}
	for _, typ := range eager.AllKnownTypes() {
		if _, ok := reflect.New(typ).Interface().(interface{ GetName() string }); ok {
			byPkg[typ.PkgPath()] = append(byPkg[typ.PkgPath()], typ)
		}
	}
	for _, g := range defaultGroups {
		if len(byPkg[g.pkg]) == 0 {
			t.Errorf("%s: no object type of it found in client-go's scheme and apiextensions/v1", g.pkg)
		}
	}
	for pkg, types := range byPkg {
		s := New()
		for _, typ := range types {
			obj := reflect.New(typ).Interface().(runtime.Object)
			want, wantErr := apiutil.GVKForObject(obj, eager)
			unlock := LockGroupOf(s, obj)
			got, err := apiutil.GVKForObject(obj, s)
			unlock()
			if (err != nil) != (wantErr != nil) || got != want {
				t.Errorf("%s %s: lazily %v, %v; eagerly %v, %v", pkg, typ.Name(), got, err, want, wantErr)
				continue
			}
			if err != nil {
				continue
			}
			list := schema.GroupVersionKind{Group: want.Group, Version: want.Version, Kind: want.Kind + "List"}
			if eager.Recognizes(list) && !s.Recognizes(list) {
				t.Errorf("%s: %s resolved lazily without its list type", pkg, want.Kind)
			}
		}
	}
}

// A scheme given in Options is never added to.
func TestGivenSchemeUntouched(t *testing.T) {
	s := runtime.NewScheme()
	if _, err := GVKOf(s, &apiextensionsv1.CustomResourceDefinition{}); err == nil {
		t.Error("a CRD resolved in a scheme that does not register it")
	}
	Complete(s)
	if n := len(s.AllKnownTypes()); n != 0 {
		t.Errorf("the given scheme has %d types registered, want none", n)
	}
}
