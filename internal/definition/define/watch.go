package define

import (
	"context"
	"fmt"
	"regexp"
	"time"

	"github.com/robfig/cron/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/internal/definition/spec"
)

// AddWatch records the declaration as a watch binding of role declared at
// site (OnEvent, Reconcile, Finalize), seeing events (all when none).
func (b *Binding) AddWatch(site string, role spec.WatchRole, events []spec.Event, set func(*spec.Watch)) {
	w := spec.Watch{
		Capability: b.Cap.Name,
		Role:       role,
		GVK:        b.GVK,
		New:        spec.NewObjectFunc(b.Proto, b.GVK),
		Filters:    b.Filters,
		Site:       b.Site,
		Events:     events,
		Select: spec.Selection{
			Namespaces: b.Namespaces(),
			Labels:     spec.LabelSelector(b.Labels),
			Name:       b.SelName,
		},
	}
	if role == spec.RoleFinalize {
		// Labels change: a Finalize binding's informer keeps the objects
		// whose labels no longer match, to release its finalizer from them
		// (its filters still select by label).
		w.Select.Labels = ""
	}
	for _, ev := range events {
		if ev != spec.Added && ev != spec.Modified && ev != spec.Deleted {
			b.m.Recordf(site, "Watch(%s).OnEvent: event %q: expected EventAdded, EventModified or EventDeleted", b.GVK.Kind, ev)
		}
	}
	if b.backoff != nil {
		if role == spec.RoleWatch {
			b.m.Recordf(b.backoffSite, "Watch(%s).Backoff before OnEvent: OnEvent handlers are not retried by back-off: declare Backoff for Reconcile, Finalize or Ordered", b.GVK.Kind)
		}
		w.Backoff = b.backoff
	}
	set(&w)
	if role == spec.RoleOrdered && !w.Queue.Valid() {
		b.m.Recordf(site, "Watch(%s).Ordered(%q, ...): expected vigil.QueuePerObject, QueuePerNamespace, QueuePerKind or QueueGlobal", b.GVK.Kind, w.Queue)
	}
	w.Name = b.Name
	b.m.AddWatch(w)
}

// Cron is a crontab schedule as declared: its text, and what parsing it
// gave.
type Cron struct {
	Expr  string
	sched cron.Schedule
	err   error
}

// ParseCron parses a crontab expression; a mistake is OnSchedule's to
// report.
func ParseCron(expr string) Cron {
	s, err := cron.ParseStandard(expr)
	return Cron{Expr: expr, sched: s, err: err}
}

// Next is the first time after t the expression names; far away for one
// that did not parse.
func (c Cron) Next(t time.Time) time.Time {
	if c.sched == nil {
		return t.Add(100 * 365 * 24 * time.Hour)
	}
	return c.sched.Next(t.UTC())
}

// Schedule is when a scheduled function runs: an Every or a Cron.
type Schedule interface {
	Next(t time.Time) time.Time
}

// ScheduleOption refines an OnSchedule; Mistake, when set, is what is wrong
// with it.
type ScheduleOption struct {
	Apply   func(*spec.Schedule)
	Mistake string
}

// OnSchedule records the schedule name declared at site: fn run on when, c
// a Cron's, every an Every's interval (nil when the schedule is another),
// refined by opts. Every mistake is recorded at site.
func (m *Module) OnSchedule(site, name string, when Schedule, c *Cron, every *time.Duration, fn func(context.Context) error, opts []ScheduleOption) {
	if !m.checkSchedule(site, name, when == nil, c, every, fn) {
		return
	}
	s := spec.Schedule{Name: name, When: fmt.Sprint(when), Next: when.Next, Run: fn, Site: site}
	if every != nil {
		s.Every = *every
	}
	for _, o := range opts {
		if o.Mistake != "" {
			m.Recordf(site, "OnSchedule(%q): %s", name, o.Mistake)
		}
		o.Apply(&s)
	}
	if s.AtInstall && !s.StartAt.IsZero() {
		m.Recordf(site, "OnSchedule(%q): StartingAt and StartingAtInstall both say when it starts: keep one", name)
	}
	m.AddSchedule(s)
}

// StartingAt makes t the schedule's first tick; a time before 2000 is a
// mistake (the zero time, a duration taken for a time).
func StartingAt(t time.Time) ScheduleOption {
	o := ScheduleOption{Apply: func(s *spec.Schedule) { s.StartAt = t.UTC() }}
	if t.Before(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)) {
		o.Mistake = fmt.Sprintf("StartingAt(%s): expected a time, as in time.Date(2027, 1, 1, 3, 0, 0, 0, time.UTC)", t)
	}
	return o
}

// Completions ends the schedule once n runs succeeded.
func Completions(n int) ScheduleOption {
	o := ScheduleOption{Apply: func(s *spec.Schedule) { s.Completions = n }}
	if n <= 0 {
		o.Mistake = fmt.Sprintf("Completions(%d): expected 1 or more runs", n)
	}
	return o
}

// checkSchedule checks a schedule declared at site by OnSchedule: none when
// it has no schedule, c a Cron's, every an Every's interval (nil when the
// schedule is another). It reports whether the schedule can be recorded.
func (m *Module) checkSchedule(site, name string, none bool, c *Cron, every *time.Duration, fn func(context.Context) error) bool {
	switch {
	case none:
		m.Recordf(site, "OnSchedule(%q): no schedule: pass Every(d) or Cron(expr)", name)
		return false
	case c != nil && c.err != nil:
		m.Recordf(site, "OnSchedule(%q): Cron(%q): expected five fields (minute hour day-of-month month day-of-week) or a descriptor such as @hourly: %v", name, c.Expr, c.err)
	case every != nil && *every <= 0:
		m.Recordf(site, "OnSchedule(%q): Every(%s): expected a positive interval", name, *every)
	}
	if !scheduleName.MatchString(name) {
		m.Recordf(site, "OnSchedule(%q): expected a name of letters, digits, '-', '_' and '.', as in nightly-cleanup", name)
	}
	if fn == nil {
		m.Recordf(site, "OnSchedule(%q): no function to run", name)
		return false
	}
	return true
}

var scheduleName = regexp.MustCompile(`^[-._a-zA-Z0-9]+$`)

// Events are the watch events an OnEvent names.
func Events[E ~string](events []E) []spec.Event {
	var out []spec.Event
	for _, ev := range events {
		out = append(out, spec.Event(ev))
	}
	return out
}

// Metadata is a prototype of a kind whose objects are read by their
// metadata alone.
func Metadata(group, version, kind string) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(schema.GroupVersionKind{Group: group, Version: version, Kind: kind})
	return m
}

// Kind is an unstructured prototype of a kind named at run time.
func Kind(group, version, kind string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: group, Version: version, Kind: kind})
	return u
}

// OnEventOf is the watch of an OnEvent handler of T.
func OnEventOf[T client.Object, E ~string](fn func(context.Context, T, E)) func(*spec.Watch) {
	return func(w *spec.Watch) {
		w.OnEvent = func(ctx context.Context, obj client.Object, ev spec.Event) { fn(ctx, obj.(T), E(ev)) }
	}
}

// OrderedOf is the watch of an Ordered handler of T, queued by.
func OrderedOf[T client.Object, E ~string](by spec.QueueBy, fn func(context.Context, T, E) error) func(*spec.Watch) {
	return func(w *spec.Watch) {
		w.Queue = by
		w.Ordered = func(ctx context.Context, obj client.Object, ev spec.Event) error { return fn(ctx, obj.(T), E(ev)) }
	}
}

// ReconcileOf is the watch of a Reconcile or Finalize handler of T.
func ReconcileOf[T client.Object](fn func(context.Context, T) error) func(*spec.Watch) {
	return func(w *spec.Watch) {
		w.Reconcile = func(ctx context.Context, obj client.Object) error { return fn(ctx, obj.(T)) }
	}
}
