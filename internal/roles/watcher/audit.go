package watcher

import (
	"context"
	"time"

	"github.com/go-logr/logr"

	"github.com/vigilkit/vigil/internal/serving/audit"
)

// Auditor is the module's audit: see internal/serving/audit.
type Auditor interface {
	// Enforced is since when the webhooks enforce, as their registration
	// records it; "" before they do.
	Enforced(ctx context.Context) (string, error)
	Run(ctx context.Context) ([]audit.Finding, error)
}

// DefaultAuditInterval is how often the audit runs when Options.AuditInterval
// is zero.
const DefaultAuditInterval = time.Hour

// auditPoll is how often the active replica reads the webhooks'
// registration record, to audit as soon as a version enforces.
var auditPoll = 2 * time.Second

// auditRunner runs the module's audit on the active replica only: once the
// webhooks enforce (and again whenever a new version or spec does), and
// every interval. A replica that becomes active audits at once when the
// webhooks already enforce.
type auditRunner struct {
	a        Auditor
	interval time.Duration
	log      logr.Logger
}

func (r *auditRunner) Start(ctx context.Context) error {
	interval := r.interval
	if interval <= 0 {
		interval = DefaultAuditInterval
	}
	seen := ""
	// last is the last run, or the start: before the webhooks enforce, the
	// first audit waits an interval.
	last := time.Now()
	poll := time.NewTicker(min(auditPoll, interval))
	defer poll.Stop()
	lastErr := ""
	for {
		enforced, err := r.a.Enforced(ctx)
		if err != nil && ctx.Err() == nil && err.Error() != lastErr {
			// Said once per distinct error: it is read every poll.
			r.log.Info("audit: cannot read the webhooks' registration record; auditing every interval only", "err", err.Error())
		}
		lastErr = ""
		if err != nil {
			lastErr = err.Error()
		}
		if (enforced != "" && enforced != seen) || time.Since(last) >= interval {
			if _, err := r.a.Run(ctx); err != nil && ctx.Err() == nil {
				r.log.Error(err, "audit of the existing objects")
			}
			last = time.Now()
			if enforced != "" {
				seen = enforced
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-poll.C:
		}
	}
}
