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

// A heap profile's space in use is read from its samples: runtime/pprof's
// own profile of this process holds some, at least what this test keeps
// alive.
func TestInUseBytesReadsAHeapProfile(t *testing.T) {
	kept := make([]byte, 8<<20)
	runtime.GC()
	var out bytes.Buffer
	if err := pprof.Lookup("heap").WriteTo(&out, 0); err != nil {
		t.Fatal(err)
	}
	n, err := inUseBytes(out.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if n < float64(len(kept)) {
		t.Errorf("in use %.0f bytes, want at least the %d this test keeps", n, len(kept))
	}
	runtime.KeepAlive(kept)
	if _, err := inUseBytes([]byte("not a profile")); err == nil {
		t.Error("inUseBytes of a text: want an error")
	}
}
