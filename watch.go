package vigil

import (
	"context"
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/vigilkit/vigil/internal/define"
	"github.com/vigilkit/vigil/internal/spec"
)

// WatchEvent is the kind of change a Watch handler sees: Added, Modified or
// Deleted, named as the Kubernetes watch API names them.
type WatchEvent string

// The events a Watch handler sees. Objects that exist when the watcher starts
// arrive as Added.
const (
	Added    WatchEvent = "ADDED"
	Modified WatchEvent = "MODIFIED"
	Deleted  WatchEvent = "DELETED"
)

// Watch calls fn with every add, update and delete of matching objects, in
// order, on the module's active watcher. IsCreated, IsUpdated and IsDeleted
// narrow the events; without them fn sees all. A panic is recovered, logged
// with the object named, and the event retried with back-off (up to four
// tries, 50 ms to 800 ms apart) while the events behind it wait, so that order
// holds; after the last try it is dropped.
func (b *WhenBuilder[T]) Watch(fn func(ctx context.Context, obj T, event WatchEvent)) {
	b.addWatch(spec.RoleWatch, func(wb *spec.Watch) {
		wb.OnEvent = func(ctx context.Context, obj client.Object, ev spec.Event) { fn(ctx, obj.(T), WatchEvent(ev)) }
	})
}

// Reconcile calls fn for matching objects from a work queue keyed by object:
// changes that arrive while an object waits or is being reconciled collapse
// into one run, which reads the object as it is then, and runs for one object
// start at least 200 ms apart (the watcher's --reconcile-spacing), so a burst
// of updates costs a few runs, not one each. An error is retried
// with exponential back-off; RequeueAfter comes back later without counting
// as a failure; a Terminal error is not retried. A panic is recovered, logged
// with the object named, and retried like an error. Deleted objects are not
// reconciled: use Finalize to act on deletion.
func (b *WhenBuilder[T]) Reconcile(fn func(ctx context.Context, obj T) error) {
	b.addWatch(spec.RoleReconcile, func(wb *spec.Watch) {
		wb.Reconcile = func(ctx context.Context, obj client.Object) error { return fn(ctx, obj.(T)) }
	})
}

// Finalize puts the module's finalizer on every matching object (including
// those that existed before the module started) and, when one is deleted,
// calls fn and removes the finalizer only once fn succeeds; until then the
// object stays. Errors are retried as for Reconcile. `<module> unregister
// --remove-finalizers` strips these finalizers for uninstall.
func (b *WhenBuilder[T]) Finalize(fn func(ctx context.Context, obj T) error) {
	b.addWatch(spec.RoleFinalize, func(wb *spec.Watch) {
		wb.Reconcile = func(ctx context.Context, obj client.Object) error { return fn(ctx, obj.(T)) }
	})
}

func (b *WhenBuilder[T]) addWatch(role spec.WatchRole, set func(*spec.Watch)) {
	m := b.c.m
	wb := spec.Watch{
		Capability: b.c.c.Name,
		Role:       role,
		GVK:        b.gvk,
		New:        spec.NewObjectFunc(b.proto, b.gvk),
		Filters:    b.filters,
		Site:       b.site,
		Select: spec.Selection{
			Namespaces: b.namespaces(),
			Labels:     spec.LabelSelector(b.labels),
			Name:       b.selName,
		},
	}
	wb.Events = define.EventsOf(b.ops)
	if b.subresource != "" {
		m.recordf(2, "When(%s).%s on a subresource: watches see objects, not subresource requests; bind the subresource with Mutate or Validate", b.gvk.Kind, role)
	}
	if role == spec.RoleFinalize && len(b.ops) > 0 {
		m.recordf(2, "When(%s).Finalize: IsCreated, IsUpdated and IsDeleted do not apply: a Finalize sees every object that matches its filters", b.gvk.Kind)
	}
	set(&wb)
	wb.Name = b.name
	m.d.AddWatch(wb)
}

// namespaces are the namespaces a binding is limited to: its own
// InNamespace, else its capability's; none means all.
func (b *WhenBuilder[T]) namespaces() []string {
	if len(b.inNamespaces) > 0 {
		return b.inNamespaces
	}
	return b.c.c.Namespaces
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
type CronSchedule struct {
	expr  string
	sched cron.Schedule
	err   error
}

// Cron is the schedule of a crontab expression, such as "*/5 * * * *".
func Cron(expr string) CronSchedule {
	s, err := cron.ParseStandard(expr)
	return CronSchedule{expr: expr, sched: s, err: err}
}

// Next is the first time after t the expression names.
func (c CronSchedule) Next(t time.Time) time.Time {
	if c.sched == nil {
		return t.Add(100 * 365 * 24 * time.Hour)
	}
	return c.sched.Next(t.UTC())
}

func (c CronSchedule) String() string { return c.expr }

// OnSchedule runs fn on the schedule, on the module's active watcher only.
// A run is never started while the previous one is still going: the ticks it
// outlasts are skipped. Every(d) first runs d after the watcher becomes
// active. A returned error or panic is logged and counted; the next tick runs
// as usual. fn finds the module's Store with StoreFrom.
func (m *Module) OnSchedule(name string, when Schedule, fn func(ctx context.Context) error) {
	site := callSite(1)
	switch s := when.(type) {
	case CronSchedule:
		if s.err != nil {
			m.recordf(1, "OnSchedule(%q): Cron(%q): expected five fields (minute hour day-of-month month day-of-week) or a descriptor such as @hourly: %v", name, s.expr, s.err)
		}
	case Interval:
		if s.every <= 0 {
			m.recordf(1, "OnSchedule(%q): Every(%s): expected a positive interval", name, s.every)
		}
	case nil:
		m.recordf(1, "OnSchedule(%q): no schedule: pass Every(d) or Cron(expr)", name)
		return
	}
	if fn == nil {
		m.recordf(1, "OnSchedule(%q): no function to run", name)
		return
	}
	m.d.AddSchedule(spec.Schedule{Name: name, When: fmt.Sprint(when), Next: when.Next, Run: fn, Site: site})
}
