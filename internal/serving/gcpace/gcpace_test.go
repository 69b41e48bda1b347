package gcpace

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestPercentGivesHeadroomWhileSmall(t *testing.T) {
	for _, c := range []struct {
		live uint64
		want int
	}{{0, MaxPercent}, {1 << 20, MaxPercent}, {16 << 20, 300}, {24 << 20, 200}, {48 << 20, 100}, {96 << 20, 50}, {1 << 30, MinPercent}} {
		if got := Percent(c.live); got != c.want {
			t.Errorf("Percent(%d MiB) = %d, want %d", c.live>>20, got, c.want)
		}
	}
}

// After each collection the percent follows the live heap: below Go's
// default once it is large.
func TestFollowsTheLiveHeap(t *testing.T) {
	t.Setenv("GOGC", "")
	if !Start() {
		t.Fatal("Start refused with GOGC unset")
	}
	defer Stop()
	if p := settle(); p != Percent(liveHeap()) || p <= 100 {
		t.Fatalf("GC percent %d with a live heap of %d bytes, want %d (> 100)", p, liveHeap(), Percent(liveHeap()))
	}
	big := make([]byte, 96<<20)
	if p := settle(); p != Percent(liveHeap()) || p >= 100 {
		t.Fatalf("GC percent %d with a live heap of %d bytes, want %d (< 100)", p, liveHeap(), Percent(liveHeap()))
	}
	runtime.KeepAlive(big)
}

// settle collects until the finalizer has set the percent for the live heap
// (it runs on its own goroutine, after the collection), and returns it.
func settle() int { return settleWithin(MaxPercent) }

// A process that holds its heap is paced within Go's default: as Go would
// while its heap is small, sooner once it is large.
func TestHoldingStaysWithinGosDefault(t *testing.T) {
	t.Setenv("GOGC", "")
	for _, c := range []struct {
		live uint64
		want int
	}{{0, 100}, {16 << 20, 100}, {48 << 20, 100}, {64 << 20, 75}, {96 << 20, 50}, {1 << 30, MinPercent}} {
		if got := percentWithin(c.live, HoldingPercent); got != c.want {
			t.Errorf("percentWithin(%d MiB, %d) = %d, want %d", c.live>>20, HoldingPercent, got, c.want)
		}
	}
	if !StartHolding() {
		t.Fatal("StartHolding refused with GOGC unset")
	}
	defer Start() // the other tests' pacing
	if p := settleWithin(HoldingPercent); p != 100 {
		t.Fatalf("GC percent %d with a live heap of %d bytes, want 100", p, liveHeap())
	}
	big := make([]byte, 96<<20)
	if p := settleWithin(HoldingPercent); p != percentWithin(liveHeap(), HoldingPercent) || p >= 100 {
		t.Fatalf("GC percent %d with a live heap of %d bytes, want %d (< 100)", p, liveHeap(), percentWithin(liveHeap(), HoldingPercent))
	}
	runtime.KeepAlive(big)
}

// settleWithin is settle for a ceiling of most.
func settleWithin(most int) int {
	for range 200 {
		runtime.GC()
		time.Sleep(time.Millisecond)
		p := debug.SetGCPercent(-1)
		debug.SetGCPercent(p)
		if p == percentWithin(liveHeap(), most) {
			return p
		}
	}
	p := debug.SetGCPercent(-1)
	debug.SetGCPercent(p)
	return p
}
