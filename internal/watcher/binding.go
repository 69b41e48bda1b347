package watcher

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/internal/spec"
)

// Role is what a binding does with the objects it sees.
type Role int

const (
	// Watch bindings see every add, update and delete, in order.
	Watch Role = iota
	// Reconcile bindings bring the world in line with each object, from a
	// de-duplicating, rate-limited queue.
	Reconcile
	// Finalize bindings hold each object's deletion until they succeed.
	Finalize
)

func (r Role) String() string {
	switch r {
	case Watch:
		return "watch"
	case Reconcile:
		return "reconcile"
	default:
		return "finalize"
	}
}

// Event is the kind of change a Watch binding sees.
type Event string

// The events of a watch, named as the Kubernetes watch API names them.
const (
	Added    Event = "ADDED"
	Modified Event = "MODIFIED"
	Deleted  Event = "DELETED"
)

// Binding is one Watch, Reconcile or Finalize of one kind of object.
type Binding struct {
	Capability string
	Name       string
	Role       Role
	GVK        schema.GroupVersionKind
	// New returns an empty object of the binding's Go type.
	New func() client.Object
	// Select is what the binding could accept as a server-side selection.
	Select Selection
	// Filters run in process for every object, after the namespaces of
	// Select.
	Filters []spec.Filter
	// Events the binding wants; all when empty.
	Events []Event
	// Watch is called for a Watch binding.
	Watch func(ctx context.Context, obj client.Object, ev Event)
	// Reconcile is called for a Reconcile or Finalize binding.
	Reconcile func(ctx context.Context, obj client.Object) error
	// Finalizer is the finalizer a Finalize binding owns.
	Finalizer string
	// Site is where the binding was declared.
	Site string
}

// ID names the binding in logs and metrics: capability/name.
func (b *Binding) ID() string { return b.Capability + "/" + b.Name }

func (b *Binding) wants(ev Event) bool {
	if len(b.Events) == 0 {
		return true
	}
	for _, e := range b.Events {
		if e == ev {
			return true
		}
	}
	return false
}

// matches applies the binding's namespaces and filters to obj.
func (b *Binding) matches(obj client.Object) bool {
	if ns := b.Select.Namespaces; len(ns) > 0 {
		found := false
		for _, n := range ns {
			if n == obj.GetNamespace() {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	if len(b.Filters) == 0 {
		return true
	}
	m := spec.Meta{Namespace: obj.GetNamespace(), Object: &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Name: obj.GetName(), Namespace: obj.GetNamespace(), Labels: obj.GetLabels(), Annotations: obj.GetAnnotations(),
		DeletionTimestamp: obj.GetDeletionTimestamp(),
	}}}
	for _, f := range b.Filters {
		if !f.Match(m) {
			return false
		}
	}
	return true
}

// Requeue asks for an object to be reconciled again after a while, without
// counting as a failure.
type Requeue struct{ After time.Duration }

func (r *Requeue) Error() string { return fmt.Sprintf("requeue after %s", r.After) }

// RequeueAfter returns whether err asks for a requeue, and when.
func RequeueAfter(err error) (time.Duration, bool) {
	var r *Requeue
	if errors.As(err, &r) {
		return r.After, true
	}
	return 0, false
}

// Schedule is a function run on the active replica on a schedule.
type Schedule struct {
	Name string
	// Next returns the first time to run after t.
	Next func(t time.Time) time.Time
	Run  func(ctx context.Context) error
	Site string
}
