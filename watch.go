package vigil

import (
	"context"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/vigilkit/vigil/internal/define"
	"github.com/vigilkit/vigil/internal/spec"
	"github.com/vigilkit/vigil/internal/watcher"
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

// WatchBuilder declares what a capability does, on the module's active
// watcher, with objects of type T: filters, then OnEvent, Reconcile or
// Finalize. A watch sees objects, not requests: it has no operations and no
// Subresource.
type WatchBuilder[T client.Object] struct {
	filterOptions[*WatchBuilder[T]]
	wd *define.Binding
}

// Watch starts a watch binding of the capability to objects of proto's
// type.
func Watch[T client.Object](c *Capability, proto T) *WatchBuilder[T] {
	b := &WatchBuilder[T]{wd: define.NewBinding(c.m.d, c.c, proto, "Watch", define.Caller())}
	b.filterOptions = filterOptions[*WatchBuilder[T]]{next: b, fd: b.wd}
	return b
}

// Named names the binding in messages and metrics; by default it is named
// after its kind, action and place.
func (b *WatchBuilder[T]) Named(name string) *WatchBuilder[T] {
	b.wd.SetName(define.Caller(), name)
	return b
}

// OnEvent calls fn with every add, update and delete of matching objects, in
// order; events narrows what it sees (all when none are named). A panic is
// recovered, logged with the object named, and the event retried with
// back-off (up to four tries, 50 ms to 800 ms apart) while the events behind
// it wait, so that order holds; after the last try it is dropped.
func (b *WatchBuilder[T]) OnEvent(fn func(ctx context.Context, obj T, event WatchEvent), events ...WatchEvent) {
	evs := make([]spec.Event, len(events))
	for i, ev := range events {
		evs[i] = spec.Event(ev)
	}
	b.wd.AddWatch(define.Caller(), spec.RoleWatch, evs, func(w *spec.Watch) {
		w.OnEvent = func(ctx context.Context, obj client.Object, ev spec.Event) { fn(ctx, obj.(T), WatchEvent(ev)) }
	}, watcher.LabelSelector, watcher.Finalizer)
}

// Reconcile calls fn for matching objects from a work queue keyed by object:
// changes that arrive while an object waits or is being reconciled collapse
// into one run, which reads the object as it is then, and runs for one object
// start at least 200 ms apart (the watcher's --reconcile-spacing), so a burst
// of updates costs a few runs, not one each. An error is retried
// with exponential back-off; RequeueAfter comes back later without counting
// as a failure; a Terminal error is not retried. A panic is recovered, logged
// with the object named, and retried like an error. Objects that are gone
// are not reconciled: use Finalize to act on deletion.
func (b *WatchBuilder[T]) Reconcile(fn func(ctx context.Context, obj T) error) {
	b.wd.AddWatch(define.Caller(), spec.RoleReconcile, nil, func(w *spec.Watch) {
		w.Reconcile = func(ctx context.Context, obj client.Object) error { return fn(ctx, obj.(T)) }
	}, watcher.LabelSelector, watcher.Finalizer)
}

// Finalize puts the module's finalizer on every matching object (including
// those that existed before the module started) and, when one is deleted,
// calls fn and removes the finalizer only once fn succeeds; until then the
// object stays. Errors are retried as for Reconcile. `<module> unregister
// --remove-finalizers` strips these finalizers for uninstall.
func (b *WatchBuilder[T]) Finalize(fn func(ctx context.Context, obj T) error) {
	b.wd.AddWatch(define.Caller(), spec.RoleFinalize, nil, func(w *spec.Watch) {
		w.Reconcile = func(ctx context.Context, obj client.Object) error { return fn(ctx, obj.(T)) }
	}, watcher.LabelSelector, watcher.Finalizer)
}

// RequeueAfter, returned by a Reconcile or Finalize handler, reconciles the
// object again after d, without counting as a failure.
func RequeueAfter(d time.Duration) error { return &watcher.Requeue{After: d} }

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

// OnSchedule runs fn on the schedule, on the module's active watcher only.
// A run is never started while the previous one is still going: the ticks it
// outlasts are skipped. Every(d) first runs d after the watcher becomes
// active. A returned error or panic is logged and counted; the next tick runs
// as usual. fn finds the module's Store with StoreFrom.
func (m *Module) OnSchedule(name string, when Schedule, fn func(ctx context.Context) error) {
	site := define.Caller()
	var c *define.Cron
	var every *time.Duration
	switch s := when.(type) {
	case CronSchedule:
		c = &s.c
	case Interval:
		every = &s.every
	}
	if m.d.CheckSchedule(site, name, when == nil, c, every, fn) {
		m.d.AddSchedule(spec.Schedule{Name: name, When: fmt.Sprint(when), Next: when.Next, Run: fn, Site: site})
	}
}
