package admissionrole

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
)

// A replica that is not ready says why in its log at every interval, not only
// on /readyz, and says once that it became ready.
func TestNotReadyIsLoggedAtAnInterval(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	log := funcr.New(func(_, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, args)
	}, funcr.Options{})
	var calls atomic.Int32
	ready := func() error {
		if calls.Add(1) <= 3 {
			return errors.New("the Store is not synced yet")
		}
		return nil
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		logNotReady(context.Background(), log, ready, 20*time.Millisecond)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("logNotReady did not return once the replica was ready")
	}
	mu.Lock()
	defer mu.Unlock()
	all := strings.Join(lines, "\n")
	if n := strings.Count(all, `"msg"="admission replica not ready" "reason"="the Store is not synced yet"`); n != 3 {
		t.Errorf("%d not-ready lines with the reason, want 3 (one per interval):\n%s", n, all)
	}
	if !strings.Contains(lines[len(lines)-1], `"msg"="admission replica ready"`) {
		t.Errorf("the last line is not that the replica is ready:\n%s", all)
	}
}

// A replica ready at its first check logs nothing; one stopped before logs no
// more.
func TestReadyReplicaLogsNothing(t *testing.T) {
	var n atomic.Int32
	log := funcr.New(func(string, string) { n.Add(1) }, funcr.Options{})
	logNotReady(context.Background(), log, func() error { return nil }, time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	logNotReady(ctx, log, func() error { return errors.New("never") }, time.Hour)
	if n.Load() != 0 {
		t.Errorf("%d lines logged, want none", n.Load())
	}
}
