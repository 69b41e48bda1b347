package audit_test

import (
	"context"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-logr/logr/funcr"

	"github.com/vigilkit/vigil/vigiltest/fault"
)

// A stream cut off midway (every connection reset after 10 of 200 objects
// were judged) is listed again page by page, and what the stream had
// found is not reported twice: every object judged, each finding once. An
// API server that does not stream lists is paged from the start. The
// objects weigh 256 KiB and the audit's socket reads into a buffer of 64
// KiB (a loopback socket's grows to 32 MiB here), so that the stream
// cannot have all of them buffered already when it is cut.
func TestAStreamCutShortIsPagedWithoutReportingTwice(t *testing.T) {
	const objects, badEvery, cutAfter = 200, 20, 10
	ns := env.Namespace(t)
	fillNamespace(t, ns, objects, 256<<10, badEvery)
	proxy, err := fault.NewProxy(env.Config, fault.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	var judged atomic.Int64
	a := paddedAuditor(ns, 10, func() {
		if judged.Add(1) == cutAfter {
			proxy.Outage(0)
		}
	})
	a.Config = proxy.Config()
	a.Config.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(64 << 10)
		}
		return c, err
	}
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
	paged := lastLine(logged, "audit: listing page by page")
	m := regexp.MustCompile(`"streamed"=(\d+)`).FindStringSubmatch(paged)
	if m == nil {
		t.Fatalf("the audit said %q when the stream was cut; want why, and how many objects it had streamed", paged)
	}
	streamed, _ := strconv.Atoi(m[1])
	t.Logf("the stream gave %d of %d objects before it broke", streamed, objects)
	if streamed < cutAfter || streamed >= objects {
		t.Errorf("the stream gave %d objects before it broke; want at least the %d judged before the cut, and not all %d", streamed, cutAfter, objects)
	}
	if n := judged.Load(); n != int64(streamed+objects) {
		t.Errorf("%d objects judged; want the %d the stream gave, then all %d paged", n, streamed, objects)
	}
	if !strings.Contains(done, fmt.Sprintf(`"objects"=%d "streams"=0`, objects)) || strings.Contains(done, `"pages"=0`) {
		t.Errorf("the audit's last line %q: want the %d objects counted once, from pages", done, objects)
	}
}
