package vigil

import (
	"context"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/vigilkit/vigil/internal/definition/define"
	"github.com/vigilkit/vigil/internal/definition/spec"
)

// WatchEvent is the kind of change an OnEvent handler sees, named as the
// Kubernetes watch API names them.
type WatchEvent string

// The events an OnEvent handler sees. Objects that exist when the watcher
// starts arrive as EventAdded.
const (
	EventAdded    WatchEvent = "ADDED"
	EventModified WatchEvent = "MODIFIED"
	EventDeleted  WatchEvent = "DELETED"
)

// WatchBuilder declares what a capability does with objects of type T on the
// active watcher: filters, then OnEvent, Reconcile or Finalize. It has no
// operations and no Subresource: a watch sees objects, not requests.
type WatchBuilder[T client.Object] struct {
	wd *define.Binding
}

// Watch starts a watch binding of the capability to objects of proto's
// type.
func Watch[T client.Object](c *Capability, proto T) *WatchBuilder[T] {
	return &WatchBuilder[T]{wd: define.NewBinding(c.m.d, c.c, proto, "Watch", define.Caller())}
}

// Named names the binding in messages and metrics; by default it is named
// after its kind, action and place.
func (b *WatchBuilder[T]) Named(name string) *WatchBuilder[T] {
	b.wd.SetName(define.Caller(), name)
	return b
}

// Backoff sets how a Reconcile or Finalize handler's failures (errors and
// panics) are retried: the first retry initial after the failure, each
// failure in a row doubling the delay, up to maxDelay; a success, a
// RequeueAfter or a Terminal error starts over. Without it: 5 ms doubling
// to 1000 s, controller-runtime's default. Retries never end on their own:
// return Terminal(err) for what retrying cannot fix.
func (b *WatchBuilder[T]) Backoff(initial, maxDelay time.Duration) *WatchBuilder[T] {
	b.wd.SetBackoff(define.Caller(), initial, maxDelay)
	return b
}

// OnEvent calls fn with every add, update and delete of matching objects, in
// order; events narrows them (all when none). A panic is retried with
// back-off, up to four tries, while later events wait; then it is dropped.
func (b *WatchBuilder[T]) OnEvent(fn func(ctx context.Context, obj T, event WatchEvent), events ...WatchEvent) {
	b.wd.AddWatch(define.Caller(), spec.RoleWatch, define.Events(events), define.OnEventOf(fn))
}

// QueueBy is which events of an Ordered binding share one queue: each
// queue's events are handled one at a time, in the order they happened; the
// queues run in parallel.
type QueueBy string

// The queues of an Ordered binding, as Pepr's reconcile strategies name them.
const (
	// QueuePerObject: one queue per object (namespace and name).
	QueuePerObject QueueBy = QueueBy(spec.QueuePerObject)
	// QueuePerNamespace: one queue per namespace.
	QueuePerNamespace QueueBy = QueueBy(spec.QueuePerNamespace)
	// QueuePerKind: one queue for the binding's kind.
	QueuePerKind QueueBy = QueueBy(spec.QueuePerKind)
	// QueueGlobal: one queue for every Ordered binding of the module with
	// QueueGlobal.
	QueueGlobal QueueBy = QueueBy(spec.QueueGlobal)
)

// Ordered calls fn with every add, update and delete of matching objects,
// none collapsed, one at a time and in order within each queue (by), the
// queues in parallel: for what must see each change (an audit trail, a state
// machine acting on transitions), where Reconcile would see only the latest
// state. An error or a panic is retried with back-off (Backoff; 5 ms
// doubling to 1000 s by default) while the queue's later events wait; a
// Terminal error drops the event. It runs on the active replica; events
// queued when it loses the lease are handled again by the next one from its
// informer's view, not replayed.
func (b *WatchBuilder[T]) Ordered(by QueueBy, fn func(ctx context.Context, obj T, event WatchEvent) error) {
	b.wd.AddWatch(define.Caller(), spec.RoleOrdered, nil, define.OrderedOf(spec.QueueBy(by), fn))
}

// Reconcile calls fn for matching objects from a work queue keyed by object:
// changes collapse into one run, runs for one object start at least 200 ms
// apart (--reconcile-spacing). Errors and panics are retried with back-off
// (Backoff; 5 ms doubling to 1000 s by default);
// RequeueAfter comes back later, a Terminal error is not retried. Objects that
// are gone are not reconciled: use Finalize.
func (b *WatchBuilder[T]) Reconcile(fn func(ctx context.Context, obj T) error) {
	b.wd.AddWatch(define.Caller(), spec.RoleReconcile, nil, define.ReconcileOf(fn))
}

// Finalize puts the module's finalizer on every matching object and, when one
// is deleted, calls fn, removing the finalizer once fn succeeds. The
// finalizer goes on as objects are created, by a MutatingAdmissionPolicy the
// manifests ship, where the cluster serves one by default (1.36 on); else
// the watcher puts it on once it sees the object (docs/watch.md, "The
// finalizer window"). An object that stops matching is released without fn.
// Errors are retried as for Reconcile; `<module> unregister
// --remove-finalizers` strips the finalizers.
func (b *WatchBuilder[T]) Finalize(fn func(ctx context.Context, obj T) error) {
	b.wd.AddWatch(define.Caller(), spec.RoleFinalize, nil, define.ReconcileOf(fn))
}

// RequeueAfter, returned by a Reconcile or Finalize handler, reconciles the
// object again after d, without counting as a failure.
func RequeueAfter(d time.Duration) error { return &spec.Requeue{After: d} }

// Terminal marks a Reconcile or Finalize handler's error as one that retrying
// cannot fix: it is logged and counted, and the object is not retried until
// it changes.
func Terminal(err error) error { return reconcile.TerminalError(err) }

// Schedule says when a scheduled function runs: Every(d) or Cron(expr).
type Schedule interface {
	// Next returns the first time to run after t.
	Next(t time.Time) time.Time
}

// Next is t plus the interval.
func (i Interval) Next(t time.Time) time.Time { return t.Add(i.every) }

func (i Interval) String() string { return "every " + i.every.String() }

// CronSchedule is a schedule in crontab's five fields (minute, hour, day of
// month, month, day of week) or a descriptor such as @hourly, in UTC.
type CronSchedule struct{ c define.Cron }

// Cron is the schedule of a crontab expression, such as "*/5 * * * *".
func Cron(expr string) CronSchedule { return CronSchedule{define.ParseCron(expr)} }

// Next is the first time after t the expression names.
func (c CronSchedule) Next(t time.Time) time.Time { return c.c.Next(t) }

func (c CronSchedule) String() string { return c.c.Expr }

// OnSchedule runs fn on the schedule, on the module's active watcher; a run
// never overlaps the previous one (the ticks it outlasts are skipped).
// Errors and panics are logged and counted.
//
// Its timing outlives restarts and leader changes: the tick of its last run
// (and how many runs succeeded) is kept in the module's Store, so a watcher
// that starts or takes over runs it when it is due, not d after it started.
// Every(d) first runs d after the schedule was first seen active, or at
// StartingAt(t). Ticks missed while no watcher ran are made up by one run
// as soon as one is active, unless SkipMissed(). Completions(n) ends it after
// n runs succeeded. Without a reachable Store it keeps time in memory, from
// each start.
func (m *Module) OnSchedule(name string, when Schedule, fn func(ctx context.Context) error, opts ...ScheduleOption) {
	var c *define.Cron
	var every *time.Duration
	switch s := when.(type) {
	case CronSchedule:
		c = &s.c
	case Interval:
		every = &s.every
	}
	options := make([]define.ScheduleOption, len(opts))
	for i, o := range opts {
		options[i] = o.o
	}
	m.d.OnSchedule(define.Caller(), name, when, c, every, fn, options)
}

// ScheduleOption refines an OnSchedule: StartingAt, StartingAtInstall,
// Completions, SkipMissed.
type ScheduleOption struct{ o define.ScheduleOption }

// StartingAt makes t the schedule's first tick: Every(d) runs at t, t+d,
// t+2d…; a Cron at its first time from t on. A fixed time, as in
// time.Date(2027, 1, 1, 3, 0, 0, 0, time.UTC): it is part of the
// definition, which every container must resolve alike.
func StartingAt(t time.Time) ScheduleOption { return ScheduleOption{define.StartingAt(t)} }

// StartingAtInstall makes the schedule's first tick the moment it is first
// seen active, that is just after the module is first installed — Pepr's
// startTime of now: it runs at once, then every interval (a Cron: at its
// next time). That moment is kept in the module's Store, so a restart or a
// new leader does not start it over. It cannot be combined with StartingAt.
func StartingAtInstall() ScheduleOption {
	return ScheduleOption{define.ScheduleOption{Apply: func(s *spec.Schedule) { s.AtInstall = true }}}
}

// Completions ends the schedule once n runs succeeded, counted across
// restarts and leader changes.
func Completions(n int) ScheduleOption { return ScheduleOption{define.Completions(n)} }

// SkipMissed skips the ticks that passed while no watcher ran: the next run
// is the next tick. Without it they are made up by one run as soon as a
// watcher is active.
func SkipMissed() ScheduleOption {
	return ScheduleOption{define.ScheduleOption{Apply: func(s *spec.Schedule) { s.SkipMissed = true }}}
}
