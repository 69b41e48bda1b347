package audit_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/definition/define"
	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/serving/admit"
	"github.com/vigilkit/vigil/internal/serving/audit"
)

// padKey is the annotation that pads each object of the load.
const padKey = "vigil.dev/pad"

// fillNamespace creates n ConfigMaps in ns, each with annotations of size
// bytes (the API server's limit on all of an object's annotations is 256
// KiB), every badEvery-th labelled bad.
func fillNamespace(tb testing.TB, ns string, n, size, badEvery int) {
	tb.Helper()
	pad := strings.Repeat("x", size-len(padKey))
	// Removed at the end: the namespace's deletion does not remove them
	// here (no controller finishes it), and they weigh on the API server.
	tb.Cleanup(func() {
		_ = env.Client.DeleteAllOf(context.Background(), &corev1.ConfigMap{}, client.InNamespace(ns))
	})
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	slots := make(chan struct{}, 4)
	for i := range n {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer func() { <-slots; wg.Done() }()
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("padded-%04d", i), Annotations: map[string]string{padKey: pad}}}
			if i%badEvery == 0 {
				cm.Labels = map[string]string{"bad": "yes"}
			}
			if err := env.Client.Create(context.Background(), cm); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		tb.Fatalf("create the padded ConfigMaps: %v", err)
	}
}

// paddedAuditor audits ConfigMaps in ns: labelled bad is denied. judged,
// when not nil, is called as each is.
func paddedAuditor(ns string, pageSize int64, judged func()) *audit.Auditor {
	name := "padded-" + ns[len(ns)-6:]
	b := define.ValidateBinding(corev1.SchemeGroupVersion.WithKind("ConfigMap"), &corev1.ConfigMap{},
		func(_ context.Context, req *admission.Request[*corev1.ConfigMap]) admission.Verdict {
			if judged != nil {
				judged()
			}
			if req.HasLabel("bad") {
				return admission.Deny("label bad is not allowed")
			}
			return admission.Allow()
		})
	b.Capability, b.Name, b.Namespaces = "padding", "no-bad", []string{ns}
	bindings := []spec.Binding{b}
	m := &spec.Module{Name: name, Namespace: ns, Version: "1.0.0", Bindings: bindings}
	h := admit.NewHandler(bindings, admit.Options{Module: name, Timeout: 5 * time.Second})
	return &audit.Auditor{Module: m, Handler: h, Config: env.Config, Log: logr.Discard(), PageSize: pageSize}
}

// peakHeap runs fn and returns by how many bytes the live heap grew over
// what it was before, at its highest. The collector runs at GOGC=10 while
// fn does, so that the heap follows what is live rather than the garbage a
// lazier collector leaves; the heap is sampled every millisecond.
func peakHeap(fn func()) uint64 {
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 {
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	base := read()
	var (
		peak uint64
		wg   sync.WaitGroup
	)
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			peak = max(peak, read())
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	fn()
	close(stop)
	wg.Wait()
	peak = max(peak, read())
	if peak < base {
		return 0
	}
	return peak - base
}

// The audit of a namespace holding far more than its page keeps only the
// findings, and its heap grows by what it reads at once, not by the
// namespace's size: 240 ConfigMaps of 256 KiB (60 MiB).
//   - Paged, in pages of 10 (2.5 MiB): two pages, each as the response's
//     bytes and decoded, the object being judged and the collector's
//     headroom measure about 6 pages (the unpaged LIST: about 94, 234
//     MiB); 12 is the bound.
//   - Streamed: the object judged and what the connection buffers, about
//     5 MiB measured however many there are; 4 MiB and 32 objects is the
//     bound. An API server that does not stream (before Kubernetes 1.34)
//     is paged, and bounded so.
func TestAuditMemoryIsBoundedByThePageOrTheObject(t *testing.T) {
	const (
		objects  = 240
		size     = 256 << 10
		pageSize = 10
		badEvery = 10
	)
	ns := env.Namespace(t)
	fillNamespace(t, ns, objects, size, badEvery)
	pages := uint64(12 * pageSize * size)
	for _, paged := range []bool{true, false} {
		t.Run(map[bool]string{true: "paged", false: "streamed"}[paged], func(t *testing.T) {
			a := paddedAuditor(ns, pageSize, nil)
			a.Paged = paged
			var logged []string
			a.Log = funcr.New(func(_, args string) { logged = append(logged, args) }, funcr.Options{})
			var (
				findings []audit.Finding
				err      error
			)
			grew := peakHeap(func() { findings, err = a.Run(t.Context()) })
			if err != nil {
				t.Fatal(err)
			}
			if want := objects / badEvery; len(findings) != want {
				t.Fatalf("%d findings, want %d: every object must be audited", len(findings), want)
			}
			bound, what := pages, "12 pages of 10: it holds more than its pages"
			if streams := !paged && !listsOnly(t); streams {
				if done := lastLine(logged, "audit done"); !strings.Contains(done, `"streams"=1 "pages"=0`) {
					t.Fatalf("the audit's last line %q: want the kind streamed, no page listed", done)
				}
				bound, what = 4<<20+32*size, "4 MiB and 32 objects: it holds more than an object at a time and what the connection buffers"
			}
			t.Logf("audit: objects=%d object_kib=%d paged=%v peak_heap_mib=%.1f bound_mib=%.1f", objects, size>>10, paged, mib(grew), mib(bound))
			if grew > bound {
				t.Errorf("the audit of %d objects of %d KiB grew the heap by %.1f MiB; want at most %.1f MiB (%s)", objects, size>>10, mib(grew), mib(bound), what)
			}
		})
	}
}

// lastLine is the last of lines that holds msg as its message.
func lastLine(lines []string, msg string) string {
	last := ""
	for _, l := range lines {
		if strings.Contains(l, `"msg"="`+msg+`"`) {
			last = l
		}
	}
	return last
}

// listsOnly reports whether the API server under test does not stream
// lists (the WatchList feature, served from Kubernetes 1.34): the audit
// pages there.
func listsOnly(t testing.TB) bool {
	t.Helper()
	var major, minor int
	if _, err := fmt.Sscanf(env.KubernetesVersion, "%d.%d", &major, &minor); err != nil {
		t.Fatalf("the control plane's version %q: want major.minor", env.KubernetesVersion)
	}
	return major == 1 && minor < 34
}

// BenchmarkAuditMemory is the load: 700 ConfigMaps of 256 KiB (175
// MiB) audited, streamed (paged, with the default page size, with
// VIGIL_AUDIT_PAGED=1); it prints the heap's peak growth.
// VIGIL_AUDIT_OBJECTS sets another count. Run it alone:
//
//	go test -run '^$' -bench BenchmarkAuditMemory -benchtime 1x ./internal/serving/audit/
func BenchmarkAuditMemory(b *testing.B) {
	objects := 700
	if v := os.Getenv("VIGIL_AUDIT_OBJECTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			b.Fatalf("VIGIL_AUDIT_OBJECTS=%q: want a number of objects", v)
		}
		objects = n
	}
	const size, badEvery = 256 << 10, 10
	ns := env.Namespace(b)
	fillNamespace(b, ns, objects, size, badEvery)
	a := paddedAuditor(ns, 0, nil)
	a.Paged = os.Getenv("VIGIL_AUDIT_PAGED") != ""
	b.ResetTimer()
	for b.Loop() {
		var err error
		grew := peakHeap(func() { _, err = a.Run(b.Context()) })
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(mib(grew), "peak_heap_MiB")
		fmt.Printf("audit: objects=%d object_kib=%d paged=%v page_size=%d peak_heap_mib=%.1f\n", objects, size>>10, a.Paged, audit.DefaultPageSize, mib(grew))
	}
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }
