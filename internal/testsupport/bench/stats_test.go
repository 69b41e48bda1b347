package bench

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	if got := Percentile(nil, 99); got != 0 {
		t.Errorf("Percentile(nil) = %s, want 0", got)
	}
	var s []time.Duration
	for i := 1; i <= 101; i++ {
		s = append(s, time.Duration(i)*time.Millisecond)
	}
	for p, want := range map[int]time.Duration{0: time.Millisecond, 50: 51 * time.Millisecond, 99: 100 * time.Millisecond, 100: 101 * time.Millisecond} {
		if got := Percentile(s, p); got != want {
			t.Errorf("Percentile(1..101ms, %d) = %s, want %s", p, got, want)
		}
	}
}

func TestUnits(t *testing.T) {
	if got := Ms(1500 * time.Microsecond); got != 1.5 {
		t.Errorf("Ms(1.5ms) = %v", got)
	}
	if got := Us(2500 * time.Nanosecond); got != 2.5 {
		t.Errorf("Us(2.5µs) = %v", got)
	}
}
