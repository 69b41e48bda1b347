package watcher

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/go-logr/logr"

	"github.com/vigilkit/vigil/internal/spec"
)

// scheduleRunner runs one schedule on the active replica. Runs never
// overlap: ticks that pass while a run is still going are skipped, and
// counted.
type scheduleRunner struct {
	s       spec.Schedule
	module  string
	log     logr.Logger
	ctx     func(ctx context.Context, capability string) context.Context
	metrics *metrics
}

func (r *scheduleRunner) Start(ctx context.Context) error {
	log := r.log.WithValues("schedule", r.s.Name)
	next := r.s.Next(time.Now())
	for {
		t := time.NewTimer(time.Until(next))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		r.run(ctx, log)
		skipped := 0
		now := time.Now()
		for next = r.s.Next(next); !next.After(now); next = r.s.Next(next) {
			skipped++
		}
		if skipped > 0 {
			r.metrics.scheduleSkipped.WithLabelValues(r.module, r.s.Name).Add(float64(skipped))
			log.Info("the run outlasted the schedule; ticks skipped rather than run twice at once", "skipped", skipped)
		}
	}
}

func (r *scheduleRunner) run(ctx context.Context, log logr.Logger) {
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
}
