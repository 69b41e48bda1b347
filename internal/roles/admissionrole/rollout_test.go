package admissionrole

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Callers share one read in flight, never more than one at a time; a caller
// that arrived while a read was in flight gets the next one's answer.
func TestNewerCheckSharesFreshReads(t *testing.T) {
	var reads, inFlight, maxInFlight atomic.Int32
	release := make(chan struct{})
	c := &newerCheck{read: func(ctx context.Context) (string, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			m := maxInFlight.Load()
			if n <= m || maxInFlight.CompareAndSwap(m, n) {
				break
			}
		}
		if reads.Add(1) == 1 {
			<-release // the first read is slow
		}
		return "", nil
	}}
	var wg sync.WaitGroup
	ask := func() {
		defer wg.Done()
		if v, err := c.Newer(context.Background()); v != "" || err != nil {
			t.Errorf("Newer = %q, %v; want none", v, err)
		}
	}
	wg.Add(1)
	go ask()
	for reads.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	// Four more arrive while the first read is in flight.
	for range 4 {
		wg.Add(1)
		go ask()
	}
	time.Sleep(50 * time.Millisecond) // the scenario: they wait on the first read
	if n := reads.Load(); n != 1 {
		t.Fatalf("%d reads while one was in flight, want 1", n)
	}
	close(release)
	wg.Wait()
	if n := reads.Load(); n != 2 {
		t.Fatalf("%d reads, want 2: the first, and one fresh read shared by the four that came during it", n)
	}
	if n := maxInFlight.Load(); n != 1 {
		t.Fatalf("%d reads in flight at once, want 1", n)
	}
	// "None newer" is not kept: the next request reads again.
	if _, err := c.Newer(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := reads.Load(); n != 3 {
		t.Fatalf("%d reads, want 3: a negative answer must not be reused", n)
	}
}

// A newer version, once seen, is kept for a while; errors and deadlines come
// back to the caller.
func TestNewerCheckKeepsANewerVersionAndHonoursDeadlines(t *testing.T) {
	var reads atomic.Int32
	answer, answerErr := "1.1.0", error(nil)
	block := make(chan struct{})
	c := &newerCheck{read: func(ctx context.Context) (string, error) {
		if reads.Add(1) == 3 {
			<-block
		}
		return answer, answerErr
	}}
	for range 3 {
		if v, err := c.Newer(context.Background()); v != "1.1.0" || err != nil {
			t.Fatalf("Newer = %q, %v; want 1.1.0", v, err)
		}
	}
	if n := reads.Load(); n != 1 {
		t.Fatalf("%d reads, want 1: a newer version is kept", n)
	}
	c.mu.Lock()
	c.newer = "" // as after newerTTL
	c.mu.Unlock()
	answer, answerErr = "", errors.New("forbidden")
	if _, err := c.Newer(context.Background()); err == nil || err.Error() != "forbidden" {
		t.Fatalf("err = %v, want the read's", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	began := time.Now()
	if _, err := c.Newer(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the caller's deadline", err)
	}
	if took := time.Since(began); took > time.Second {
		t.Fatalf("returned after %s, want at the 50ms deadline", took)
	}
	close(block)
	if v, err := (&newerCheck{}).Newer(context.Background()); v != "" || err != nil {
		t.Fatalf("without registration: %q, %v; want none", v, err)
	}
}
