package define

import (
	"context"
	"regexp"
	"time"

	"github.com/robfig/cron/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

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

// CheckSchedule checks a schedule declared at site by OnSchedule: none when
// it has no schedule, c a Cron's, every an Every's interval (nil when the
// schedule is another). It reports whether the schedule can be recorded.
func (m *Module) CheckSchedule(site, name string, none bool, c *Cron, every *time.Duration, fn func(context.Context) error) bool {
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
