package scale

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/vigilkit/vigil/internal/testsupport/bench"
	"github.com/vigilkit/vigil/vigiltest"
	"github.com/vigilkit/vigil/vigiltest/fault"
)

// creates is what a run of createAt saw.
type creates struct {
	lat    []time.Duration // sorted
	failed int
	first  error // the first failure's
	took   time.Duration
}

func (c creates) p(q int) float64 { return bench.Ms(bench.Percentile(c.lat, q)) }

// createAt creates n bare Pods in ns at rate a second, from enough workers
// that a slow answer does not slow the rate, and times each create as the
// client sees it (the request through the API server, its admission
// included). The pods are deleted afterwards.
func createAt(ctx context.Context, cs kubernetes.Interface, ns, run string, rate, n int) creates {
	return createLabelled(ctx, cs, ns, run, nil, rate, n)
}

// createLabelled is createAt with these labels besides on each Pod.
func createLabelled(ctx context.Context, cs kubernetes.Interface, ns, run string, extra map[string]string, rate, n int) creates {
	jobs := make(chan int, n)
	var mu sync.Mutex
	out := creates{}
	var wg sync.WaitGroup
	for range 256 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				tmpl := workloadPod("probe")
				// No scheduler serves it: the create is timed, not the
				// scheduling and the simulated start a real cluster does
				// after it, which would load the API server's two cores
				// more than the creates themselves.
				tmpl.Spec.SchedulerName = "bench-unscheduled"
				labels := map[string]string{"app": "probe", "scale.vigil.dev/run": run}
				maps.Copy(labels, extra)
				p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%05d", run, i),
					Labels: labels}, Spec: tmpl.Spec}
				began := time.Now()
				_, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
				d := time.Since(began)
				mu.Lock()
				if err != nil {
					out.failed++
					if out.first == nil {
						out.first = err
					}
				} else {
					out.lat = append(out.lat, d)
				}
				mu.Unlock()
			}
		}()
	}
	began := time.Now()
	tick := time.NewTicker(time.Second / time.Duration(rate))
	for i := range n {
		jobs <- i
		if i < n-1 {
			<-tick.C
		}
	}
	tick.Stop()
	close(jobs)
	wg.Wait()
	out.took = time.Since(began)
	slices.Sort(out.lat)
	_ = cs.CoreV1().Pods(ns).DeleteCollection(context.WithoutCancel(ctx), metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "scale.vigil.dev/run=" + run})
	return out
}

// metricSum is the sum of every series of the metric at url.
func metricSum(url, name string) float64 {
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		if i := strings.LastIndexByte(line, ' '); i > 0 {
			v, _ := strconv.ParseFloat(line[i+1:], 64)
			sum += v
		}
	}
	return sum
}

// rssMiB is the process's resident memory now ("VmRSS") or at its peak
// ("VmHWM"), in MiB.
func rssMiB(pid int, field string) float64 { return float64(bench.ProcStatus(pid, field)) / 1024 }

// admissions are the admission replicas' processes, measured together.
type admissions []replica

// replica is an admission replica's process and its metrics' URL.
type replica struct {
	proc    *vigiltest.Process
	pid     int
	metrics string
}

func admissionsOf(pods []*vigiltest.Pod) admissions {
	var a admissions
	for _, p := range pods {
		proc := p.Process("admission")
		a = append(a, replica{proc, proc.Pid(), "http://" + p.Ports["metrics"] + "/metrics"})
	}
	return a
}

// logged is how much each replica has written so far: where a later
// reviews reads from.
func (a admissions) logged() []int {
	var at []int
	for _, r := range a {
		at = append(at, len(r.proc.Output.String()))
	}
	return at
}

// reviews are the times the replicas took to answer the requests for the
// objects named with prefix, as their decision lines written since from
// (a sample: each replica logs up to 100 decisions a second) say.
func (a admissions) reviews(from []int, prefix string) []time.Duration {
	var took []time.Duration
	for i, r := range a {
		out := r.proc.Output.String()[from[i]:]
		for line := range strings.Lines(out) {
			if logField(line, "event") != "decision" || !strings.HasPrefix(logField(line, "name"), prefix) {
				continue
			}
			if d, err := time.ParseDuration(logField(line, "took")); err == nil {
				took = append(took, d)
			}
		}
	}
	slices.Sort(took)
	return took
}

// cpu is the CPU time the replicas have used, together.
func (a admissions) cpu() time.Duration {
	var d time.Duration
	for _, r := range a {
		d += bench.ProcCPU(r.pid)
	}
	return d
}

// metric is the sum of a counter over the replicas.
func (a admissions) metric(name string) float64 {
	var n float64
	for _, r := range a {
		n += metricSum(r.metrics, name)
	}
	return n
}

// rss is the largest replica's resident memory, in MiB.
func (a admissions) rss() float64 {
	var most float64
	for _, r := range a {
		most = max(most, rssMiB(r.pid, "VmRSS"))
	}
	return most
}

// resetPeak starts the process's VmHWM over from its resident memory now.
func resetPeak(b *testing.B, pid int) {
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		b.Fatalf("reset the peak memory of process %d: %v", pid, err)
	}
}

// lagRE is a line podwatch prints: the pod, the change's time, the lag.
var lagRE = regexp.MustCompile(`(?m)^lag (\S+) (\d+) ([0-9.]+)$`)

// reconcileLag annotates n pods of the workloads with the time of the
// change, 50 a second, and returns the time from each change to podwatch's
// handler seeing it, as podwatch prints it (sorted).
func reconcileLag(b *testing.B, cs kubernetes.Interface, watcher *vigiltest.Process, n int) []time.Duration {
	ctx := b.Context()
	list, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: "app=web", FieldSelector: "status.phase=Running", Limit: int64(n)})
	if err != nil {
		b.Fatal(err)
	}
	pods := list.Items
	if len(pods) < n {
		b.Fatalf("%d running pods of the workloads to change, want %d", len(pods), n)
	}
	want := map[string]bool{}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for _, p := range pods {
		<-tick.C
		at := strconv.FormatInt(time.Now().UnixNano(), 10)
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"scale.vigil.dev/changed-at":%q}}}`, at)
		if _, err := cs.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			b.Fatalf("annotate pod %s/%s: %v", p.Namespace, p.Name, err)
		}
		want[p.Namespace+"/"+p.Name+" "+at] = true
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		seen := map[string]time.Duration{}
		for _, m := range lagRE.FindAllStringSubmatch(watcher.Output.String(), -1) {
			key := m[1] + " " + m[2]
			if _, dup := seen[key]; want[key] && !dup {
				ms, _ := strconv.ParseFloat(m[3], 64)
				seen[key] = time.Duration(ms * float64(time.Millisecond))
			}
		}
		if len(seen) == len(want) || time.Now().After(deadline) {
			if len(seen) < len(want) {
				b.Fatalf("podwatch reconciled %d of the %d changed pods within 2m", len(seen), len(want))
			}
			lags := make([]time.Duration, 0, len(seen))
			for _, d := range seen {
				lags = append(lags, d)
			}
			slices.Sort(lags)
			return lags
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// doneRE finds the audit's "audit done" line.
var doneRE = regexp.MustCompile(`[^\n]*audit done[^\n]*`)

// logField is the value of field name in a log line, as the modules' text
// handler (log/slog) writes it (name=v, name="v"), or JSON ("name":"v").
func logField(line, name string) string {
	m := regexp.MustCompile(`(?:^|[\s{,])"?` + regexp.QuoteMeta(name) + `"?[=:]"?([^",}\s]+)`).FindStringSubmatch(line)
	if m == nil {
		return ""
	}
	return m[1]
}

// auditFigures are what the audit of every pod took: its duration, the
// watcher's peak memory in MiB at its end, the lists it streamed, the pages
// it listed and the longest one page took.
type auditFigures struct {
	took, slowestPage time.Duration
	peakMiB           float64
	streams, pages    int
}

// auditOnce runs a watcher of UDS Core's engine from start, whose first
// audit judges every pod of the cluster, and returns its figures.
func auditOnce(b *testing.B, bin, kubeconfig string) auditFigures {
	probe := vigiltest.FreeAddr(b)
	w := vigiltest.StartProcess(b, nil, bin, "watcher", "--kubeconfig", kubeconfig, "--metrics-addr=", "--probe-addr", probe, "--audit-interval", "1h")
	defer w.Stop(b, time.Minute)
	deadline := time.Now().Add(10 * time.Minute)
	for {
		if line := doneRE.FindString(w.Output.String()); line != "" {
			var f auditFigures
			var err error
			if f.took, err = time.ParseDuration(logField(line, "took")); err != nil {
				b.Fatalf("the audit's duration in %q: %v", line, err)
			}
			if f.slowestPage, err = time.ParseDuration(logField(line, "slowestPage")); err != nil {
				b.Fatalf("the audit's slowest page in %q: %v", line, err)
			}
			if f.pages, err = strconv.Atoi(logField(line, "pages")); err != nil {
				b.Fatalf("the audit's pages in %q: %v", line, err)
			}
			if f.streams, err = strconv.Atoi(logField(line, "streams")); err != nil {
				b.Fatalf("the audit's streams in %q: %v", line, err)
			}
			f.peakMiB = rssMiB(w.Pid(), "VmHWM")
			return f
		}
		select {
		case <-w.Exited():
			b.Fatalf("the watcher of UDS Core's engine exited %d before its audit was done:\n%s", w.ExitCode(), w.Output)
		default:
		}
		if time.Now().After(deadline) {
			b.Fatalf("the audit was not done within 10m:\n%s", w.Output)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitReady waits for the process's /readyz on addr, and returns how long
// it took from began.
func waitReady(b *testing.B, p *vigiltest.Process, addr string, began time.Time) time.Duration {
	for {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return time.Since(began)
			}
		}
		select {
		case <-p.Exited():
			b.Fatalf("%s exited %d before it was ready:\n%s", p, p.ExitCode(), p.Output)
		default:
		}
		if time.Since(began) > 10*time.Minute {
			b.Fatalf("%s not ready within 10m:\n%s", p, p.Output)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// watched is what watchPods measured of a process that watches every Pod.
type watched struct {
	ready      time.Duration   // from its start to ready, its informers synced
	steady     float64         // its resident memory 5 s after, in MiB
	live       float64         // its heap after a collection then, in MiB
	relistPeak float64         // its peak through a relist (with a proxy)
	lags       []time.Duration // podwatch's reconcile lags (with lag)
}

// watchPods starts bin (podwatch's watcher reading as reads says, or
// crcache when reads is empty) against kubeconfig, waits for it to be
// ready, and measures its memory; through proxy it also forces a relist
// (every watch answered 410 Gone) and measures the peak; with lag, the
// reconcile lag of 200 changes. It stops the process.
func watchPods(b *testing.B, ds []*daemon, cs kubernetes.Interface, bin string, proxy *fault.Proxy, kubeconfig, reads string, lag bool) watched {
	var w watched
	probe, metrics := vigiltest.FreeAddr(b), vigiltest.FreeAddr(b)
	args := []string{"--kubeconfig", kubeconfig, "--probe-addr", probe}
	var env []string
	if reads != "" {
		args = append([]string{"watcher", "--metrics-addr", metrics, "--pprof"}, args...)
		env = []string{"PODWATCH_READS=" + reads}
	}
	began := time.Now()
	p := vigiltest.StartProcess(b, env, bin, args...)
	defer p.Stop(b, time.Minute)
	w.ready = waitReady(b, p, probe, began)
	time.Sleep(5 * time.Second)
	w.steady = rssMiB(p.Pid(), "VmRSS")
	w.live = liveMiB(b, probe, metrics, reads)
	if proxy != nil {
		relists := metricSum("http://"+metrics+"/metrics", "vigil_informer_relists_total")
		resetPeak(b, p.Pid())
		proxy.ExpireWatches(time.Second)
		waitFor(b, ds, 5*time.Minute, "podwatch's informers listed again", func() (bool, string) {
			now := metricSum("http://"+metrics+"/metrics", "vigil_informer_relists_total")
			return now > relists, fmt.Sprintf("relists %v", now)
		})
		waitReady(b, p, probe, time.Now())
		time.Sleep(5 * time.Second)
		w.relistPeak = rssMiB(p.Pid(), "VmHWM")
	}
	if lag {
		w.lags = reconcileLag(b, cs, p, 200)
	}
	return w
}

// saveProfile fetches the profile at url into file.
func saveProfile(url, file string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	say("the admission's CPU profile written to %s", file)
	return f.Close()
}

// liveMiB is what the process's heap holds once its garbage is collected,
// in MiB: podwatch's (a watcher with --pprof) from the heap profile's text
// form, whose handler collects the garbage and then reads the heap's
// figures in the same request (what a busy cluster's events allocate in a
// second request, as a metrics scrape would be, does not count), crcache's
// from /live (a collection and the heap read at once after it).
//
// With SCALE_HEAP_DIR set, podwatch's heap profile is kept there, for
// `go tool pprof -sample_index=inuse_space -top FILE`: what holds the heap.
func liveMiB(b *testing.B, probe, metrics, reads string) float64 {
	if reads != "" {
		resp, err := http.Get("http://" + metrics + "/debug/pprof/heap?gc=1&debug=1")
		if err != nil {
			b.Fatalf("collect podwatch's garbage: %v", err)
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			b.Fatalf("podwatch's heap profile: %v", err)
		}
		if dir := os.Getenv("SCALE_HEAP_DIR"); dir != "" {
			file := filepath.Join(dir, fmt.Sprintf("podwatch-%s-%s.heap", reads, time.Now().Format("150405")))
			if err := os.WriteFile(file, data, 0o644); err != nil {
				b.Fatalf("keep podwatch's heap profile: %v", err)
			}
			say("podwatch's heap profile written to %s", file)
		}
		alloc, err := heapAlloc(data)
		if err != nil {
			b.Fatalf("podwatch's heap profile: %v", err)
		}
		return alloc / (1 << 20)
	}
	resp, err := http.Get("http://" + probe + "/live")
	if err != nil {
		b.Fatalf("crcache's live heap: %v", err)
	}
	defer resp.Body.Close()
	var n float64
	if _, err := fmt.Fscan(resp.Body, &n); err != nil {
		b.Fatalf("crcache's live heap: %v", err)
	}
	return n / (1 << 20)
}

// timed runs bin with args and env as a platform engineer would, and
// returns how long it took; an exit code other than those ok is fatal.
func timed(b *testing.B, env []string, ok []int, bin string, args ...string) time.Duration {
	began := time.Now()
	p := vigiltest.StartProcess(b, env, bin, args...)
	code := p.Wait(b, 10*time.Minute)
	took := time.Since(began)
	if !slices.Contains(ok, code) {
		b.Fatalf("%s %s: exit %d, want one of %v:\n%s", filepath.Base(bin), strings.Join(args, " "), code, ok, p.Output)
	}
	return took
}

// operatorTimes are how long a platform engineer waits at the cluster's
// size: a gate on the Pods (at least running of them Running: podwatch's
// phase 0, which lists every Pod), `vigil status` of UDS Core's engine and
// `plan --cluster` of podwatch, which counts every Pod and measures some.
func operatorTimes(b *testing.B, pwBin, vigilBin, kubeconfig string, running int) (gate, status, plan time.Duration) {
	env := []string{"KUBECONFIG=" + kubeconfig, "VIGIL_NAMESPACE=podwatch-system", "VIGIL_HANDOFF_DIR=" + b.TempDir(),
		"PODWATCH_GATE_PODS=" + strconv.Itoa(max(1, running/2))}
	gate = timed(b, env, []int{0}, pwBin, "gate", "--phase", "0")
	status = timed(b, nil, []int{0}, vigilBin, "status", "uds-core", "--kubeconfig", kubeconfig)
	// Exit 1 is its answer that a role would not fit its limit.
	plan = timed(b, nil, []int{0, 1}, pwBin, "plan", "--cluster", "--kubeconfig", kubeconfig)
	return gate, status, plan
}

// takeover runs two podwatch watchers reading whole Pods, both ready, kills
// the one that holds the Lease (a crash: it is not released) and returns
// how long after the kill the other ran its handler for a Pod changed
// meanwhile: what a watcher's outage lasts at this size, the Lease's 15 s
// and the standby's start of its bindings (its informers synced while it
// waited).
func takeover(b *testing.B, cs kubernetes.Interface, bin, kubeconfig string) time.Duration {
	ctx := b.Context()
	list, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: "app=web", FieldSelector: "status.phase=Running", Limit: 100})
	if err != nil || len(list.Items) == 0 {
		b.Fatalf("running pods of the workloads to change: %d (%v)", len(list.Items), err)
	}
	next := 0
	// change annotates a Pod as changed now and returns its key in the
	// lag lines.
	change := func() string {
		p := list.Items[next%len(list.Items)]
		next++
		at := strconv.FormatInt(time.Now().UnixNano(), 10)
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"scale.vigil.dev/changed-at":%q}}}`, at)
		if _, err := cs.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			b.Fatalf("annotate pod %s/%s: %v", p.Namespace, p.Name, err)
		}
		return p.Namespace + "/" + p.Name + " " + at
	}
	// ran is when w's handler ran for the change key, if it has.
	ran := func(w *vigiltest.Process, key string) (time.Time, bool) {
		for _, m := range lagRE.FindAllStringSubmatch(w.Output.String(), -1) {
			if m[1]+" "+m[2] == key {
				at, _ := strconv.ParseInt(m[2], 10, 64)
				ms, _ := strconv.ParseFloat(m[3], 64)
				return time.Unix(0, at).Add(time.Duration(ms * float64(time.Millisecond))), true
			}
		}
		return time.Time{}, false
	}
	var ws []*vigiltest.Process
	for range 2 {
		probe := vigiltest.FreeAddr(b)
		w := vigiltest.StartProcess(b, []string{"PODWATCH_READS=pod"}, bin, "watcher", "--kubeconfig", kubeconfig, "--metrics-addr=", "--probe-addr", probe)
		defer w.Stop(b, time.Minute)
		waitReady(b, w, probe, time.Now())
		ws = append(ws, w)
	}
	var leader, standby *vigiltest.Process
	key := change()
	waitFor(b, nil, time.Minute, "one of two podwatch watchers reconciles a change", func() (bool, string) {
		for i, w := range ws {
			if _, ok := ran(w, key); ok {
				leader, standby = w, ws[1-i]
				return true, ""
			}
		}
		return false, "neither has run its handler"
	})
	if err := leader.Cmd.Process.Kill(); err != nil {
		b.Fatal(err)
	}
	killed := time.Now()
	// A change every half second until the standby runs its handler for
	// one: the first run of any is when its bindings started.
	var keys []string
	for time.Since(killed) < 2*time.Minute {
		keys = append(keys, change())
		first := time.Time{}
		for _, k := range keys {
			if at, ok := ran(standby, k); ok && (first.IsZero() || at.Before(first)) {
				first = at
			}
		}
		if !first.IsZero() {
			say("the standby podwatch watcher took over %s after the leader was killed", first.Sub(killed).Round(time.Millisecond))
			return first.Sub(killed)
		}
		time.Sleep(500 * time.Millisecond)
	}
	b.Fatalf("the standby podwatch watcher reconciled none of %d changes within 2m of the leader's kill:\n%s", len(keys), standby.Output)
	return 0
}

// floorLabel marks the Pods whose creates go through the floor server.
const floorLabel = "scale.vigil.dev/floor"

// startFloor runs the floor server (bench.StartFloor: it answers a review
// at once, decoding nothing) and registers it as a mutating and a
// validating webhook, as UDS Core's engine is registered, for the Pods
// created in kube-system with floorLabel: what any two webhooks cost a
// create on this API server, whatever they do.
func startFloor(b *testing.B, cs kubernetes.Interface) {
	cert := vigiltest.NewServingCert(b, "127.0.0.1")
	fl := bench.StartFloor(b, cert.Dir)
	rules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
	}}
	nsSel := &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": metav1.NamespaceSystem}}
	objSel := &metav1.LabelSelector{MatchLabels: map[string]string{floorLabel: "true"}}
	none, fail := admissionregistrationv1.SideEffectClassNone, admissionregistrationv1.Fail
	cc := func(path string) admissionregistrationv1.WebhookClientConfig {
		url := fl.Base + path
		return admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: cert.CABundle}
	}
	ctx := b.Context()
	if _, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-scale-floor"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "mutate.floor.bench", ClientConfig: cc("/mutate"), Rules: rules, NamespaceSelector: nsSel, ObjectSelector: objSel,
			SideEffects: &none, FailurePolicy: &fail, AdmissionReviewVersions: []string{"v1"},
		}},
	}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-scale-floor"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "validate.floor.bench", ClientConfig: cc("/validate"), Rules: rules, NamespaceSelector: nsSel, ObjectSelector: objSel,
			SideEffects: &none, FailurePolicy: &fail, AdmissionReviewVersions: []string{"v1"},
		}},
	}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	// The floor is called once the API server has seen its configuration:
	// a labelled Pod comes back with its patch.
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		tmpl := workloadPod("probe")
		tmpl.Spec.SchedulerName = "bench-unscheduled"
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: fmt.Sprintf("floor-ready-%d", i),
			Labels: map[string]string{floorLabel: "true"}}, Spec: tmpl.Spec}
		got, err := cs.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
		if err == nil {
			_ = cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{})
			if got.Labels["vigil.dev/labeled"] == "true" {
				return
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("the floor server's webhooks were not called within 30s (last create: %v)", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// heapAlloc is the HeapAlloc a heap profile's text form (debug=1) reports:
// the heap's bytes as read when the profile was written.
func heapAlloc(profile []byte) (float64, error) {
	for line := range strings.Lines(string(profile)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "# HeapAlloc = "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, fmt.Errorf("a heap profile without HeapAlloc (want the text form, debug=1)")
}
