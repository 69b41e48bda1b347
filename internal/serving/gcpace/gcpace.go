package gcpace

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

const (
	// Headroom is how far beyond the live heap the heap may grow before a
	// collection while the live heap is small.
	Headroom = 48 << 20
	// MaxPercent and MinPercent bound the GC percent set.
	MaxPercent = 400
	MinPercent = 50
)

var (
	once    sync.Once
	stopped atomic.Bool
	// ceiling is the most the percent is set to: MaxPercent, or
	// HoldingPercent for a process started with StartHolding.
	ceiling atomic.Int64
)

// HoldingPercent is the most the percent is for a process whose heap is
// mostly what it holds, as a watcher's informers' caches: Go's default.
const HoldingPercent = 100

// Start paces the collector until Stop, unless the environment sets GOGC.
// It reports whether it does.
func Start() bool { return start(MaxPercent) }

// StartHolding paces the collector of a process whose heap is mostly what
// it holds, as Start does but never above Go's default: such a heap is
// collected as Go would while it is small, and once it outgrows Headroom,
// sooner, so that a burst of allocation — a relist of every informer,
// which holds a new copy of each cache beside the old one — grows it by
// Headroom, down to half again what is live, rather than doubling it.
func StartHolding() bool { return start(HoldingPercent) }

func start(most int) bool {
	if os.Getenv("GOGC") != "" {
		return false
	}
	ceiling.Store(int64(most))
	debug.SetGCPercent(percentWithin(liveHeap(), most))
	once.Do(func() { arm(&sentinel{}) })
	stopped.Store(false)
	return true
}

// Stop leaves the collector at Go's default from the next collection on.
func Stop() {
	stopped.Store(true)
	debug.SetGCPercent(100)
}

// Percent is the GC percent for a live heap of live bytes: Headroom beyond
// it, between MinPercent and MaxPercent.
func Percent(live uint64) int { return percentWithin(live, MaxPercent) }

// percentWithin is Percent with most in place of MaxPercent.
func percentWithin(live uint64, most int) int {
	if live == 0 {
		return most
	}
	return int(min(uint64(most), max(MinPercent, uint64(Headroom)*100/live)))
}

// sentinel is garbage that the collector finalizes after each collection:
// its finalizer sets the percent again and arms the next one.
type sentinel struct{ _ [16]byte }

func arm(s *sentinel) { runtime.SetFinalizer(s, after) }

func after(s *sentinel) {
	if stopped.Load() {
		return
	}
	debug.SetGCPercent(percentWithin(liveHeap(), int(ceiling.Load())))
	arm(s)
}

var liveSample = []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
var sampleMu sync.Mutex

// liveHeap is the heap marked live by the last collection.
func liveHeap() uint64 {
	sampleMu.Lock()
	defer sampleMu.Unlock()
	metrics.Read(liveSample)
	if liveSample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return liveSample[0].Value.Uint64()
}
