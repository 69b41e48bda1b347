package spec

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/vigilkit/vigil/store"
)

// Gate is one startup gate.
type Gate struct {
	Name  string `json:"name"`
	Phase int    `json:"phase"`
	// WaitsFor says what the gate waits for, in words.
	WaitsFor string        `json:"waitsFor"`
	Timeout  time.Duration `json:"timeout"`
	Optional bool          `json:"optional"`
	// Fallback reports whether the gate finishes with a fallback on timeout.
	Fallback bool   `json:"fallback"`
	Site     string `json:"site"`
	// Waits is the object the gate waits for; nil for a Sample gate, which
	// reads nothing from the API server.
	Waits *Object `json:"waits,omitempty"`
	// Creates are the objects the gate's callback creates.
	Creates []Object `json:"creates,omitempty"`

	// Wait is what the engine watches for; for an object gate.
	Wait Wait `json:"-"`
	// Finish turns what the wait found into the gate's result, running the
	// author's callback; for an object gate.
	Finish func(ctx context.Context, objs []*unstructured.Unstructured, s store.Store) (any, error) `json:"-"`
	// Sample polls until the sample matches and returns the result, running
	// the author's callback; for a Sample gate. seen reports each sample.
	Sample func(ctx context.Context, seen func(found bool, what string), s store.Store) (any, error) `json:"-"`
	// OnTimeout produces the result when the timeout expires; nil without a
	// fallback.
	OnTimeout func(ctx context.Context, s store.Store) (any, error) `json:"-"`
}

// Object is an object by kind, namespace and name: what a gate waits for or
// creates.
type Object struct {
	Group   string `json:"group"`
	Version string `json:"version"`
	Kind    string `json:"kind"`
	// Namespace is empty for any namespace, or a cluster-scoped object.
	Namespace string `json:"namespace,omitempty"`
	// Name is empty for any object of the kind (matching Labels).
	Name string `json:"name,omitempty"`
	// Labels is a label selector, as text.
	Labels string `json:"labels,omitempty"`
}

// ObjectOf is the object of this kind, namespace and name.
func ObjectOf(gvk schema.GroupVersionKind, namespace, name string) Object {
	return Object{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Namespace: namespace, Name: name}
}

// GVK is the object's group, version and kind.
func (o Object) GVK() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: o.Group, Version: o.Version, Kind: o.Kind}
}
