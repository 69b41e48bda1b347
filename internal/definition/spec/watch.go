package spec

import (
	"context"
	"fmt"
	"reflect"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// WatchRole is what a watch binding does with the objects it sees.
type WatchRole string

const (
	// RoleWatch bindings see every add, update and delete, in order.
	RoleWatch WatchRole = "watch"
	// RoleReconcile bindings bring the world in line with each object, from
	// a de-duplicating, rate-limited queue.
	RoleReconcile WatchRole = "reconcile"
	// RoleFinalize bindings hold each object's deletion until they succeed.
	RoleFinalize WatchRole = "finalize"
	// RoleOrdered bindings handle every event, none collapsed, in order
	// within each of their queues (Queue), the queues in parallel.
	RoleOrdered WatchRole = "ordered"
)

// QueueBy is which events of an Ordered binding share one queue.
type QueueBy string

// The queues of an Ordered binding.
const (
	// QueuePerObject queues each object's events apart.
	QueuePerObject QueueBy = "object"
	// QueuePerNamespace queues each namespace's events apart.
	QueuePerNamespace QueueBy = "namespace"
	// QueuePerKind queues all the binding's events together.
	QueuePerKind QueueBy = "kind"
	// QueueGlobal queues the events of every global Ordered binding of the
	// module together.
	QueueGlobal QueueBy = "global"
)

// Valid reports whether q is one of the queues.
func (q QueueBy) Valid() bool {
	switch q {
	case QueuePerObject, QueuePerNamespace, QueuePerKind, QueueGlobal:
		return true
	}
	return false
}

func (r WatchRole) String() string { return string(r) }

// Event is the kind of change a Watch binding sees.
type Event string

// The events of a watch, named as the Kubernetes watch API names them.
const (
	Added    Event = "ADDED"
	Modified Event = "MODIFIED"
	Deleted  Event = "DELETED"
)

// Selection is what one user of a type (a binding or a lister) needs of it.
// Empty fields mean all: every namespace, every label, every name.
type Selection struct {
	Namespaces []string `json:"namespaces,omitempty"`
	// Labels is a label selector in its canonical text form ("app=web,tier").
	Labels string `json:"labels,omitempty"`
	Name   string `json:"name,omitempty"`
}

// Lister is one reader of a type's informer: a lister the author declared.
type Lister struct {
	GVK schema.GroupVersionKind `json:"gvk"`
	// New returns an empty object of the type (unstructured ones carry their
	// GVK).
	New    func() client.Object `json:"-"`
	Select Selection            `json:"select"`
}

// Watch is one Watch, Reconcile or Finalize binding of one kind of object.
type Watch struct {
	Capability string                  `json:"capability"`
	Name       string                  `json:"name"`
	Role       WatchRole               `json:"role"`
	GVK        schema.GroupVersionKind `json:"gvk"`
	// Select is what the binding could accept as a server-side selection.
	Select Selection `json:"select"`
	// Filters run in process for every object, after the namespaces of
	// Select.
	Filters []Filter `json:"filters,omitempty"`
	// Events the binding wants; all when empty.
	Events []Event `json:"events,omitempty"`
	// Finalizer is the finalizer a Finalize binding owns.
	Finalizer string `json:"finalizer,omitempty"`
	// Site is where the binding was declared.
	Site string `json:"site"`
	// Backoff is how a Reconcile or Finalize binding's failures are
	// retried; DefaultBackoff when nil.
	Backoff *Backoff `json:"backoff,omitempty"`

	// New returns an empty object of the binding's Go type.
	New func() client.Object `json:"-"`
	// OnEvent is called for a Watch binding.
	OnEvent func(ctx context.Context, obj client.Object, ev Event) `json:"-"`
	// Reconcile is called for a Reconcile or Finalize binding.
	Reconcile func(ctx context.Context, obj client.Object) error `json:"-"`
	// Queue is an Ordered binding's queues.
	Queue QueueBy `json:"queue,omitempty"`
	// Ordered is called for an Ordered binding, once per event.
	Ordered func(ctx context.Context, obj client.Object, ev Event) error `json:"-"`
}

// ID names the binding in logs and metrics: capability/name.
func (w *Watch) ID() string { return w.Capability + "/" + w.Name }

// Backoff is the delay before an object's next try after a failure: Initial
// after the first, doubling with each failure in a row, at most Max. A
// success, a RequeueAfter or a Terminal error starts it over.
type Backoff struct {
	Initial time.Duration `json:"initial"`
	Max     time.Duration `json:"max"`
}

// DefaultBackoff is a Reconcile's unless it declares its own:
// controller-runtime's, 5 ms doubling to 1000 s (16m40s).
var DefaultBackoff = Backoff{Initial: 5 * time.Millisecond, Max: 1000 * time.Second}

// RetryBackoff is the binding's back-off.
func (w *Watch) RetryBackoff() Backoff {
	if w.Backoff != nil {
		return *w.Backoff
	}
	return DefaultBackoff
}

// Lister is what the watch binding reads of its type's informer.
func (w *Watch) Lister() Lister { return Lister{GVK: w.GVK, New: w.New, Select: w.Select} }

// Schedule is a function run on the watcher's active replica on a schedule.
type Schedule struct {
	Name string `json:"name"`
	// When says when it runs, e.g. "every 30s" or "*/5 * * * *".
	When string `json:"when"`
	Site string `json:"site"`
	// Every is an interval schedule's interval; 0 for a cron.
	Every time.Duration `json:"every,omitempty"`
	// StartAt, when set, is its first tick; else the first tick after it
	// was first seen active.
	StartAt time.Time `json:"startAt,omitzero"`
	// AtInstall makes its first tick the moment it was first seen active.
	AtInstall bool `json:"atInstall,omitempty"`
	// Completions, when above 0, ends it after that many runs succeeded.
	Completions int `json:"completions,omitempty"`
	// SkipMissed skips the ticks that passed while no watcher ran; without
	// it they are made up by one run as soon as a watcher is active.
	SkipMissed bool `json:"skipMissed,omitempty"`

	// Next returns the first time to run after t.
	Next func(t time.Time) time.Time     `json:"-"`
	Run  func(ctx context.Context) error `json:"-"`
}

// StateKey is the module-wide Store key that keeps the schedule's state
// across restarts and leader changes.
func (s *Schedule) StateKey() string { return "vigil.schedule." + s.Name }

// NewObjectFunc returns empty objects of proto's type; unstructured ones
// carry the kind.
func NewObjectFunc(proto client.Object, gvk schema.GroupVersionKind) func() client.Object {
	if _, ok := proto.(*unstructured.Unstructured); ok {
		return func() client.Object {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(gvk)
			return u
		}
	}
	if _, ok := proto.(*metav1.PartialObjectMetadata); ok {
		return func() client.Object {
			m := &metav1.PartialObjectMetadata{}
			m.SetGroupVersionKind(gvk)
			return m
		}
	}
	t := reflect.TypeOf(proto).Elem()
	return func() client.Object { return reflect.New(t).Interface().(client.Object) }
}

// Requeue is the error a Reconcile handler returns to be called again for
// the object after a while, without counting as a failure (RequeueAfter).
type Requeue struct{ After time.Duration }

func (r *Requeue) Error() string { return fmt.Sprintf("requeue after %s", r.After) }
