package dev

import (
	"strings"
	"testing"
	"time"
)

// A waiting gate that keeps seeing the same is printed at the interval of
// vigil dev --gate-progress, even as its reports drift by some milliseconds,
// and every five seconds when none is set.
func TestPrinterHonoursGateProgress(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// Reports every second, each a little early or late.
	var reports []time.Duration
	for i := 1; i <= 13; i++ {
		drift := time.Duration(i%3-1) * 20 * time.Millisecond
		reports = append(reports, time.Duration(i)*time.Second+drift)
	}
	for _, tc := range []struct {
		interval time.Duration
		want     int
	}{
		{time.Second, 13},
		{2 * time.Second, 7},
		{0, 3},
	} {
		var out strings.Builder
		p := &Printer{Out: &out, Start: start, GateProgress: tc.interval}
		for _, at := range reports {
			p.Print(Event{At: start.Add(at), Kind: GateWaiting, Role: "phase 0", Gate: "g", Seen: "1 of 1 match", Text: "gate g waiting: last saw 1 of 1 match"})
		}
		if got := strings.Count(out.String(), "gate g waiting"); got != tc.want {
			t.Errorf("--gate-progress %s: %d lines over 13 reports a second apart, want %d:\n%s", tc.interval, got, tc.want, out.String())
		}
	}
}
