package audit_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"

	"github.com/vigilkit/vigil/internal/serving/audit"
)

// A stream that ends before its last object (here after 15 of 40, as the
// API server's stream comes to its end early), or falls silent there (as an
// API server that stops sending, or a proxy holding a watch's bytes back),
// is listed again page by page, and what the stream had found is not
// reported twice: every object judged, each finding once. A run after one
// whose stream fell silent streams again. An API server that does not
// stream lists is paged from the start.
func TestAStreamCutShortIsPagedWithoutReportingTwice(t *testing.T) {
	for _, tc := range []struct {
		name, why string
		cut       func(a *audit.Auditor, n int)
	}{
		{"ends", "ended before its last object", (*audit.Auditor).CutStreamsAfter},
		{"falls silent", "gave nothing for 5s", (*audit.Auditor).StallStreamsAfter},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const objects, badEvery, cutAfter = 40, 4, 15
			ns := env.Namespace(t)
			fillNamespace(t, ns, objects, 1<<10, badEvery)
			var judged atomic.Int64
			a := paddedAuditor(ns, 10, func() { judged.Add(1) })
			// Long enough that a loaded API server's first event comes
			// within it, short enough for a test.
			a.StreamSilence = 5 * time.Second
			tc.cut(a, cutAfter)
			var logged []string
			a.Log = funcr.New(func(_, args string) { logged = append(logged, args) }, funcr.Options{})
			findings, err := a.Run(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]int{}
			for _, f := range findings {
				seen[f.Name]++
			}
			if len(seen) != objects/badEvery || len(findings) != objects/badEvery {
				t.Errorf("%d findings of %d objects: want each of the %d bad ConfigMaps once", len(findings), len(seen), objects/badEvery)
			}
			done := lastLine(logged, "audit done")
			if listsOnly(t) {
				if !strings.Contains(done, `"streams"=0`) || judged.Load() != objects {
					t.Errorf("an API server that does not stream: %d judged, last line %q; want the %d paged, none streamed", judged.Load(), done, objects)
				}
				return
			}
			if paged := lastLine(logged, "audit: listing page by page"); !strings.Contains(paged, fmt.Sprintf(`"streamed"=%d`, cutAfter)) || !strings.Contains(paged, tc.why) {
				t.Errorf("the audit said %q when the stream %s; want why (%q), and that it had streamed %d", paged, tc.name, tc.why, cutAfter)
			}
			if n := judged.Load(); n != cutAfter+objects {
				t.Errorf("%d objects judged; want the %d the stream gave, then all %d paged", n, cutAfter, objects)
			}
			if !strings.Contains(done, fmt.Sprintf(`"objects"=%d "streams"=0`, objects)) || strings.Contains(done, `"pages"=0`) {
				t.Errorf("the audit's last line %q: want the %d objects counted once, from pages", done, objects)
			}
			a.NoStreamHook()
			a.StreamSilence = 0
			if _, err := a.Run(t.Context()); err != nil {
				t.Fatal(err)
			}
			if again := lastLine(logged, "audit done"); !strings.Contains(again, fmt.Sprintf(`"objects"=%d "streams"=1 "pages"=0`, objects)) {
				t.Errorf("the next run's last line %q: want the %d objects streamed again, nothing paged", again, objects)
			}
		})
	}
}
