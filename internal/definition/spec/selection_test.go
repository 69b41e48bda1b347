package spec

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var (
	cmGVK  = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	podGVK = schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
)

func user(gvk schema.GroupVersionKind, sel Selection) Lister {
	return Lister{GVK: gvk, New: func() client.Object { return &corev1.ConfigMap{} }, Select: sel}
}

// The server selects only what every user of a type agrees on.
func TestAgree(t *testing.T) {
	for _, tc := range []struct {
		name  string
		users []Lister
		want  Agreed
	}{
		{"one user keeps its selection", []Lister{user(cmGVK, Selection{Namespaces: []string{"b", "a"}, Labels: "app=web", Name: "x"})},
			Agreed{Namespaces: []string{"a", "b"}, Labels: "app=web", Name: "x"}},
		{"namespaces are united when all are limited", []Lister{user(cmGVK, Selection{Namespaces: []string{"a"}}), user(cmGVK, Selection{Namespaces: []string{"b", "a"}})},
			Agreed{Namespaces: []string{"a", "b"}}},
		{"one cluster-wide user makes the informer cluster-wide", []Lister{user(cmGVK, Selection{Namespaces: []string{"a"}}), user(cmGVK, Selection{})},
			Agreed{}},
		{"labels only when equal", []Lister{user(cmGVK, Selection{Labels: "app=web"}), user(cmGVK, Selection{Labels: "app=db"})},
			Agreed{}},
		{"equal labels go to the server", []Lister{user(cmGVK, Selection{Labels: "app=web"}), user(cmGVK, Selection{Labels: "app=web"})},
			Agreed{Labels: "app=web"}},
		{"a lister sees everything", []Lister{user(cmGVK, Selection{Name: "x", Labels: "a"}), user(cmGVK, Selection{})},
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
	if got := Agree([]Lister{user(podGVK, Selection{}), user(cmGVK, Selection{}), user(podGVK, Selection{})}); len(got) != 2 || got[0].GVK.Kind != "ConfigMap" {
		t.Fatalf("one informer per type, sorted: got %+v", got)
	}
}

// A kind read whole and read as metadata gets an informer each way, both
// selecting what every user of the kind agrees on: the cache keeps one
// selection per kind, so a narrower one would hide objects from the other.
func TestAgreeAcrossWholeAndMetadata(t *testing.T) {
	meta := Lister{GVK: podGVK, New: func() client.Object { return &metav1.PartialObjectMetadata{} }, Select: Selection{}}
	whole := user(podGVK, Selection{Namespaces: []string{"apps"}, Labels: "app=web"})
	got := Agree([]Lister{meta, whole})
	if len(got) != 2 || got[0].Metadata || !got[1].Metadata {
		t.Fatalf("got %+v, want the whole informer, then the metadata one", got)
	}
	for _, a := range got {
		if len(a.Namespaces) != 0 || a.Labels != "" {
			t.Fatalf("informer %+v selects less than the cluster-wide metadata user reads", a)
		}
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
