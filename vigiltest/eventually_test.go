package vigiltest_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vigilkit/vigil/vigiltest"
)

// recorder is a testing.TB whose Fatalf records the failure instead of
// ending the goroutine.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	if r.failed == "" {
		r.failed = fmt.Sprintf(format, args...)
	}
}

func TestEventually(t *testing.T) {
	calls := 0
	began := time.Now()
	vigiltest.Eventually(t, 5*time.Second, func() error {
		if calls++; calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if calls != 3 {
		t.Fatalf("cond called %d times, want 3: polling stops once it holds", calls)
	}
	if took := time.Since(began); took > time.Second {
		t.Fatalf("took %s for three polls", took)
	}

	r := &recorder{TB: t}
	began = time.Now()
	vigiltest.Eventually(r, 100*time.Millisecond, func() error { return errors.New("the last error") })
	if took := time.Since(began); took < 100*time.Millisecond || took > time.Second {
		t.Fatalf("gave up after %s, want just after the 100ms window", took)
	}
	for _, want := range []string{"not within 100ms", "the last error"} {
		if !strings.Contains(r.failed, want) {
			t.Errorf("failure %q lacks %q", r.failed, want)
		}
	}
}

func TestConsistently(t *testing.T) {
	calls := 0
	began := time.Now()
	vigiltest.Consistently(t, 100*time.Millisecond, func() error { calls++; return nil })
	if took := time.Since(began); took < 100*time.Millisecond {
		t.Fatalf("returned after %s, before the 100ms window ended", took)
	}
	if calls < 2 {
		t.Fatalf("cond called %d times over the window, want it polled", calls)
	}

	r := &recorder{TB: t}
	calls = 0
	began = time.Now()
	vigiltest.Consistently(r, 5*time.Second, func() error {
		if calls++; calls == 3 {
			return errors.New("it happened")
		}
		return nil
	})
	if took := time.Since(began); took > time.Second {
		t.Fatalf("failed after %s, want as soon as cond erred", took)
	}
	for _, want := range []string{"within 5s", "it happened"} {
		if !strings.Contains(r.failed, want) {
			t.Errorf("failure %q lacks %q", r.failed, want)
		}
	}
}
