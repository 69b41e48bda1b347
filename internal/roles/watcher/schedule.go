package watcher

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/go-logr/logr"

	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/runtime/callctx"
)

// scheduleRunner runs one schedule on the active replica. Runs never
// overlap: ticks that pass while a run is still going are skipped, and
// counted. Its state — when it was first seen active, the tick of its last
// run, the runs that succeeded — is kept in the module-wide Store under
// spec.Schedule.StateKey, so that a replica that starts or takes over
// continues its timing.
type scheduleRunner struct {
	s       spec.Schedule
	module  string
	log     logr.Logger
	ctx     func(ctx context.Context, capability string) context.Context
	metrics *metrics
}

// scheduleState is what the Store keeps of a schedule.
type scheduleState struct {
	// Since is when the schedule was first seen active: Every(d)'s first
	// tick is Since+d.
	Since time.Time `json:"since"`
	// Last is the tick of the last run started.
	Last time.Time `json:"last,omitzero"`
	// Completions are the runs that succeeded.
	Completions int `json:"completions,omitempty"`
}

// storeWait bounds how long a replica waits for the Store before it keeps a
// schedule's time in memory.
const storeWait = 15 * time.Second

func (r *scheduleRunner) Start(ctx context.Context) error {
	log := r.log.WithValues("schedule", r.s.Name)
	st, kept := r.load(ctx, log)
	if ctx.Err() != nil {
		return nil
	}
	if r.done(st) {
		log.Info("the schedule has completed its runs", "completions", st.Completions)
		return nil
	}
	now := time.Now()
	next, missed := r.first(st, now)
	if missed > 0 {
		if r.s.SkipMissed {
			log.Info("ticks passed while no watcher ran: skipped (SkipMissed)", "missed", missed, "next", next)
		} else {
			log.Info("ticks passed while no watcher ran: made up by one run now", "missed", missed)
		}
		skipped := missed
		if !r.s.SkipMissed {
			skipped-- // one is made up
		}
		r.metrics.scheduleSkipped.WithLabelValues(r.module, r.s.Name).Add(float64(skipped))
	}
	for {
		t := time.NewTimer(time.Until(next))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		st.Last = next
		r.save(ctx, kept, st, log)
		if r.run(ctx, log) == nil {
			st.Completions++
			if r.s.Completions > 0 { // counted in the Store only when they end it
				r.save(ctx, kept, st, log)
			}
		}
		if r.done(st) {
			log.Info("the schedule has completed its runs", "completions", st.Completions)
			return nil
		}
		var skipped int
		next, skipped = r.after(r.s.Next(st.Last), time.Now())
		if skipped > 0 {
			r.metrics.scheduleSkipped.WithLabelValues(r.module, r.s.Name).Add(float64(skipped))
			log.Info("the run outlasted the schedule; ticks skipped rather than run twice at once", "skipped", skipped)
		}
	}
}

// done says whether the schedule has had all the runs it declared.
func (r *scheduleRunner) done(st scheduleState) bool {
	return r.s.Completions > 0 && st.Completions >= r.s.Completions
}

// first is the schedule's next run after a start at now, and how many ticks
// passed since its last run (or its first tick) while no watcher ran.
func (r *scheduleRunner) first(st scheduleState, now time.Time) (time.Time, int) {
	var due time.Time
	switch {
	case !st.Last.IsZero():
		due = r.s.Next(st.Last)
	case r.s.AtInstall:
		due = st.Since // the moment it was first seen active, kept in the Store
	case !r.s.StartAt.IsZero() && r.s.Every > 0:
		due = r.s.StartAt // an interval's ticks are StartAt, StartAt+d, …
	case !r.s.StartAt.IsZero():
		due = r.s.Next(r.s.StartAt.Add(-time.Nanosecond)) // a cron's first time from StartAt on
	default:
		due = r.s.Next(st.Since)
	}
	next, missed := r.after(due, now)
	if missed > 0 && !r.s.SkipMissed {
		return now, missed
	}
	return next, missed
}

// after is the first tick after now, counting from tick, and how many ticks
// from tick on are not after now (counted up to a million: past that, the
// next tick is the schedule's first after now).
func (r *scheduleRunner) after(tick, now time.Time) (time.Time, int) {
	passed := 0
	for ; !tick.After(now) && passed < 1_000_000; tick = r.s.Next(tick) {
		passed++
	}
	if !tick.After(now) {
		tick = r.s.Next(now)
	}
	return tick, passed
}

// load reads the schedule's state from the Store, recording it as first
// seen now when the Store holds none; kept is false when the Store cannot
// be reached, and the state then lives in memory from now.
func (r *scheduleRunner) load(ctx context.Context, log logr.Logger) (scheduleState, bool) {
	fresh := scheduleState{Since: time.Now().UTC()}
	s := callctx.Store(r.ctx(ctx, ""))
	if s == nil {
		return fresh, false
	}
	wctx, cancel := context.WithTimeout(ctx, storeWait)
	defer cancel()
	if err := s.WaitForSync(wctx); err != nil {
		if ctx.Err() == nil {
			log.Error(err, "the schedule's state cannot be read from the Store: its time is kept in memory from this start, and a restart begins it again")
		}
		return fresh, false
	}
	var st scheduleState
	err := s.Update(wctx, r.s.StateKey(), func(old string, found bool) (string, error) {
		st = fresh
		if found {
			if err := json.Unmarshal([]byte(old), &st); err != nil || st.Since.IsZero() {
				log.Info("the schedule's state in the Store is unreadable: starting it again", "key", r.s.StateKey(), "value", old)
				st = fresh
			} else {
				return old, nil
			}
		}
		data, err := json.Marshal(st)
		return string(data), err
	})
	if err != nil {
		if ctx.Err() == nil {
			log.Error(err, "the schedule's state cannot be written to the Store: its time is kept in memory from this start, and a restart begins it again")
		}
		return fresh, false
	}
	return st, true
}

// save writes the state when the Store keeps it. A failed write is logged:
// the schedule runs on, and a replica that takes over may repeat a tick.
func (r *scheduleRunner) save(ctx context.Context, kept bool, st scheduleState, log logr.Logger) {
	if !kept {
		return
	}
	s := callctx.Store(r.ctx(ctx, ""))
	data, err := json.Marshal(st)
	if err == nil {
		wctx, cancel := context.WithTimeout(ctx, storeWait)
		err = s.Set(wctx, r.s.StateKey(), string(data))
		cancel()
	}
	if err != nil && ctx.Err() == nil {
		log.Error(err, "the schedule's state was not saved: a replica that takes over may run this tick again", "key", r.s.StateKey())
	}
}

func (r *scheduleRunner) run(ctx context.Context, log logr.Logger) error {
	start := time.Now()
	err := func() (err error) {
		defer func() {
			if p := recover(); p != nil {
				log.Error(fmt.Errorf("%v", p), "schedule panicked", "site", r.s.Site, "stack", string(debug.Stack()))
				err = fmt.Errorf("panic: %v", p)
			}
		}()
		return r.s.Run(logr.NewContext(r.ctx(ctx, ""), log))
	}()
	result := "ok"
	if err != nil {
		result = "error"
		log.Error(err, "schedule run failed", "site", r.s.Site)
	}
	r.metrics.scheduleRuns.WithLabelValues(r.module, r.s.Name, result).Inc()
	r.metrics.scheduleSeconds.WithLabelValues(r.module, r.s.Name).Observe(time.Since(start).Seconds())
	return err
}
