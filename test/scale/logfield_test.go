package scale

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"
)

// The bench reads the audit's and the decisions' figures from the modules'
// log lines, as log/slog's text handler writes them, or as JSON.
func TestLogFieldReadsTheModulesLines(t *testing.T) {
	var text bytes.Buffer
	slog.New(slog.NewTextHandler(&text, nil)).Info("audit done", "event", "audit-done", "took", (1500 * time.Millisecond).String(), "pages", 12, "slowestPage", "1m0s", "name", "r1000-200-00001")
	var js bytes.Buffer
	if err := json.NewEncoder(&js).Encode(map[string]any{"msg": "audit done", "event": "audit-done", "took": "1.5s", "pages": 12, "slowestPage": "1m0s", "name": "r1000-200-00001"}); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{text.String(), js.String()} {
		for field, want := range map[string]string{"event": "audit-done", "took": "1.5s", "pages": "12", "slowestPage": "1m0s", "name": "r1000-200-00001", "absent": ""} {
			if got := logField(line, field); got != want {
				t.Errorf("logField(%q, %q) = %q, want %q", line, field, got, want)
			}
		}
	}
}

// The heap's bytes are read from a heap profile's text form, which
// runtime/pprof writes with the heap's figures: this process's holds at
// least what this test keeps alive.
func TestHeapAllocReadsAHeapProfile(t *testing.T) {
	kept := make([]byte, 8<<20)
	var out bytes.Buffer
	if err := pprof.Lookup("heap").WriteTo(&out, 1); err != nil {
		t.Fatal(err)
	}
	n, err := heapAlloc(out.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if n < float64(len(kept)) {
		t.Errorf("HeapAlloc %.0f bytes, want at least the %d this test keeps", n, len(kept))
	}
	runtime.KeepAlive(kept)
	if _, err := heapAlloc([]byte("heap profile: 0: 0 [0: 0] @ heap/1048576\n")); err == nil {
		t.Error("heapAlloc of a profile without HeapAlloc: want an error")
	}
}
