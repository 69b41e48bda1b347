package vigiltest

import (
	"testing"
	"time"
)

// PollInterval is how often Eventually and Consistently call their condition.
const PollInterval = 20 * time.Millisecond

// Eventually calls cond at once and then every PollInterval until it returns
// nil, and fails the test when it has not within the window: the failure
// names the window and cond's last error. Use it instead of sleeping for a
// while and then asserting that something has happened, so that the test
// states how long it allows and takes no longer than needed.
//
// Like t.Fatal, it must be called from the goroutine running the test.
func Eventually(t testing.TB, within time.Duration, cond func() error) {
	t.Helper()
	start := time.Now()
	deadline := start.Add(within)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %s (gave up after %s): %v", within, time.Since(start).Round(time.Millisecond), err)
			return
		}
		time.Sleep(PollInterval)
	}
}

// Consistently calls cond at once and then every PollInterval for the whole
// window, and fails the test as soon as cond returns an error, with that
// error and how far into the window it came. Use it instead of sleeping for a
// while and then asserting that something has not happened: the window it is
// given is the claim the test makes ("nothing happens for 1s").
//
// Like t.Fatal, it must be called from the goroutine running the test.
func Consistently(t testing.TB, during time.Duration, cond func() error) {
	t.Helper()
	start := time.Now()
	deadline := start.Add(during)
	for {
		if err := cond(); err != nil {
			t.Fatalf("within %s, after %s: %v", during, time.Since(start).Round(time.Millisecond), err)
			return
		}
		if !time.Now().Before(deadline) {
			return
		}
		time.Sleep(min(PollInterval, time.Until(deadline)))
	}
}
