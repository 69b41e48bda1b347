package admissionrole

import (
	"context"
	"time"

	"github.com/go-logr/logr"
)

// NotReadyLogInterval is how often a replica that is not ready logs why.
const NotReadyLogInterval = 10 * time.Second

// logNotReady logs, every interval while ready fails, why the replica is not
// ready — what /readyz answers — so that `kubectl logs` tells it too; and once
// that it became ready, when it had said it was not. It returns when ctx ends
// or the replica is ready.
func logNotReady(ctx context.Context, log logr.Logger, ready func() error, interval time.Duration) {
	if interval <= 0 {
		interval = NotReadyLogInterval
	}
	began := time.Now()
	said := false
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := ready()
		if err == nil {
			if said {
				log.Info("admission replica ready", "after", time.Since(began).Round(time.Second).String())
			}
			return
		}
		said = true
		log.Info("admission replica not ready", "reason", err.Error(), "for", time.Since(began).Round(time.Second).String())
	}
}
