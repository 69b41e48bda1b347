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
)

// Start paces the collector until Stop, unless the environment sets GOGC.
// It reports whether it does.
func Start() bool {
	if os.Getenv("GOGC") != "" {
		return false
	}
	once.Do(func() {
		debug.SetGCPercent(Percent(liveHeap()))
		arm(&sentinel{})
	})
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
func Percent(live uint64) int {
	if live == 0 {
		return MaxPercent
	}
	return int(min(MaxPercent, max(MinPercent, uint64(Headroom)*100/live)))
}

// sentinel is garbage that the collector finalizes after each collection:
// its finalizer sets the percent again and arms the next one.
type sentinel struct{ _ [16]byte }

func arm(s *sentinel) { runtime.SetFinalizer(s, after) }

func after(s *sentinel) {
	if stopped.Load() {
		return
	}
	debug.SetGCPercent(Percent(liveHeap()))
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
