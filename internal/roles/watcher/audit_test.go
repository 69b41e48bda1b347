package watcher

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/vigilkit/vigil/internal/serving/audit"
)

// fakeAuditor records when it runs; its enforcement time is set by the test.
type fakeAuditor struct {
	mu       sync.Mutex
	enforced string
	runs     int
}

func (f *fakeAuditor) Enforced(context.Context) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.enforced, nil
}

func (f *fakeAuditor) Run(context.Context) ([]audit.Finding, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runs++
	return nil, nil
}

func (f *fakeAuditor) set(enforced string) {
	f.mu.Lock()
	f.enforced = enforced
	f.mu.Unlock()
}

func (f *fakeAuditor) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.runs
}

func waitRuns(t *testing.T, f *fakeAuditor, want int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for f.count() < want {
		if time.Now().After(deadline) {
			t.Fatalf("%d audit runs after %s, want %d", f.count(), within, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestAuditRunsOnEnforcementAndEveryInterval(t *testing.T) {
	defer func(p time.Duration) { auditPoll = p }(auditPoll)
	auditPoll = 10 * time.Millisecond
	f := &fakeAuditor{}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- (&auditRunner{a: f, interval: time.Second, log: logr.Discard()}).Start(ctx)
	}()
	// Not enforced: nothing runs before the interval.
	time.Sleep(150 * time.Millisecond)
	if n := f.count(); n != 0 {
		t.Fatalf("%d runs before the webhooks enforce and before the interval, want 0", n)
	}
	// Enforced: it runs at once, and once only.
	f.set("2026-01-01T00:00:00Z")
	waitRuns(t, f, 1, 300*time.Millisecond)
	time.Sleep(200 * time.Millisecond)
	if n := f.count(); n != 1 {
		t.Fatalf("%d runs soon after enforcement, want 1", n)
	}
	// Every interval.
	waitRuns(t, f, 2, 1500*time.Millisecond)
	// A new version enforces: at once again.
	before := f.count()
	f.set("2026-01-01T01:00:00Z")
	waitRuns(t, f, before+1, 300*time.Millisecond)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
