package soak_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/commands/modcli"
	"github.com/vigilkit/vigil/internal/runtime/watchhealth"
	"github.com/vigilkit/vigil/vigiltest"
	"github.com/vigilkit/vigil/vigiltest/fault"
)

// The faults soak-watch puts between the module's roles and the API server,
// in turn.
var watchFaults = []string{"stall", "blackhole", "throttle", "expire", "cut"}

// BenchmarkSoakWatch (make soak-watch): a module's gate, admission lister and
// watcher (OnEvent and Reconcile) run behind a fault proxy, which in turn
// leaves their connections half-open (stall), drops everything for twice the
// stale bound (blackhole), answers 429 for 3 s (throttle), ends watches and
// answers the next ones 410 Gone (expire) and resets connections (cut),
// SOAK_WATCH_ROUNDS times (15 by
// default), while objects change — one deleted and created again during each
// blackhole. After each fault it measures how long each role took to notice a
// silence and to match the API server again; admission decisions made during
// the faults must match the API server's data; at the end each role's view
// must equal the API server's. Run with -benchtime 1x.
func BenchmarkSoakWatch(b *testing.B) {
	r := soakWatch(b, envCount(b, "SOAK_WATCH_ROUNDS", 15))
	fmt.Printf("watch: faults=%d stall_detect_p99=%.1fs recover_p99=%.1fs missed_final_states=%d stale_decisions=%d reconcile_missed=%d\n",
		r.faults, r.detectP99.Seconds(), r.recoverP99.Seconds(), r.missedFinal, r.staleDecisions, r.reconcileMissed)
	fmt.Printf("watch: stale_after=%s decisions=%d undecided=%d stall_detects=%d recover_max=%.1fs readyz_named_stale=%v\n",
		r.staleAfter, r.decisions, r.undecided, r.detects, r.recoverMax.Seconds(), r.readyzNamedStale)
	var by []string
	for _, f := range watchFaults {
		if d, ok := r.recoverBy[f]; ok {
			by = append(by, fmt.Sprintf("%s=%.1fs", f, d.Seconds()))
		}
	}
	fmt.Printf("watch: recover_max_by_fault %s\n", strings.Join(by, " "))
}

// One round of each fault, as a test.
func TestWatchSurvivesEveryFault(t *testing.T) {
	r := soakWatch(t, len(watchFaults))
	t.Logf("faults=%d stall_detect_p99=%s recover_p99=%s recover_max=%s decisions=%d undecided=%d", r.faults, r.detectP99, r.recoverP99, r.recoverMax, r.decisions, r.undecided)
}

type watchResult struct {
	faults, detects, decisions, undecided         int
	missedFinal, staleDecisions, reconcileMissed  int
	detectP99, recoverP99, recoverMax, staleAfter time.Duration
	readyzNamedStale, admissionNamedStale         bool
	// recoverBy is the longest recovery after each kind of fault.
	recoverBy map[string]time.Duration
}

// cmState is what a view holds of a ConfigMap.
type cmState struct{ uid, v string }

func stateOf(c *corev1.ConfigMap) cmState { return cmState{uid: string(c.UID), v: c.Data["v"]} }

// views are what each role has seen, as its handlers report it.
type views struct {
	mu         sync.Mutex
	watched    map[string]cmState // OnEvent: the watcher's informer
	reconciled map[string]cmState // Reconcile: the last run per name
	listed     map[string]cmState // the admission lister, at the last view probe
}

func (v *views) set(m map[string]cmState, name string, s *cmState) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if s == nil {
		delete(m, name)
		return
	}
	m[name] = *s
}

// watchModule is the soak's module: one per role, as in separate processes.
func watchModule(name, home, data, apps string, v *views, round *atomic.Int64) *vigil.Module {
	m := vigil.NewModule(name, vigil.Options{Namespace: home})
	cms := vigil.NewLister(m, &corev1.ConfigMap{}).InNamespace(data)
	probes := m.Capability("probes", vigil.InNamespaces(apps))
	vigil.When(probes, &corev1.ConfigMap{}).IsCreated().Named("needs").
		Validate(func(ctx context.Context, r *vigil.Request[*corev1.ConfigMap]) vigil.Verdict {
			if r.Object.Name == "view" {
				// The lister's view as it is, with nothing found: no recheck.
				seen := map[string]cmState{}
				if _, err := cms.Find(ctx, func(c *corev1.ConfigMap) bool { seen[c.Name] = stateOf(c); return false }); err != nil {
					return admission.Deny("the lister cannot be read: " + err.Error())
				}
				v.mu.Lock()
				clear(v.listed)
				maps.Copy(v.listed, seen)
				v.mu.Unlock()
				return admission.Allow()
			}
			needs := r.Object.Labels["needs"]
			if needs == "" {
				return admission.Allow()
			}
			if _, err := cms.Get(ctx, data, needs); err != nil {
				if apierrors.IsNotFound(err) {
					return admission.Deny("needs " + needs + ", which does not exist")
				}
				return admission.Deny("the lister cannot be read: " + err.Error())
			}
			return admission.Allow()
		})
	watched := m.Capability("watched", vigil.InNamespaces(data))
	vigil.Watch(watched, &corev1.ConfigMap{}).Named("view").OnEvent(func(_ context.Context, c *corev1.ConfigMap, ev vigil.WatchEvent) {
		if ev == vigil.EventDeleted {
			v.set(v.watched, c.Name, nil)
			return
		}
		s := stateOf(c)
		v.set(v.watched, c.Name, &s)
	})
	vigil.Watch(watched, &corev1.ConfigMap{}).Named("reconcile").Reconcile(func(_ context.Context, c *corev1.ConfigMap) error {
		s := stateOf(c)
		v.set(v.reconciled, c.Name, &s)
		return nil
	})
	vigil.WaitFor(m, &corev1.ConfigMap{}).Named("round").WithName("gate-target").InNamespace(data).
		ToMatch(func(c *corev1.ConfigMap) bool { return c.Data["round"] == strconv.FormatInt(round.Load(), 10) })
	return m
}

// stallsByRole sums the stalls the module's informers noticed, by role.
func stallsByRole(t testing.TB, module string) map[string]float64 {
	reg := prometheus.NewRegistry()
	reg.MustRegister(watchhealth.Collector())
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "vigil_informer_stalls_total" {
			continue
		}
		for _, mt := range f.GetMetric() {
			var mod, role string
			for _, l := range mt.GetLabel() {
				switch l.GetName() {
				case "module":
					mod = l.GetValue()
				case "role":
					role = l.GetValue()
				}
			}
			if mod == module {
				out[role] += mt.GetCounter().GetValue()
			}
		}
	}
	return out
}

func soakWatch(tb testing.TB, rounds int) watchResult {
	const staleAfter = 4 * time.Second
	tb.Setenv(watchhealth.EnvStaleAfter, staleAfter.String())
	ctx, cancel := context.WithTimeout(tb.Context(), time.Duration(rounds)*40*time.Second+2*time.Minute)
	defer cancel()
	home, data, apps := env.Namespace(tb), env.Namespace(tb), env.Namespace(tb)
	name := "watch-" + home[len(home)-6:]
	bootstrapConfigs(tb, name)
	proxy, err := fault.NewProxy(env.Config, fault.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { proxy.Close() })
	kc := vigiltest.WriteKubeConfig(tb, proxy.Config())
	handoff := tb.TempDir()
	tb.Setenv(modcli.EnvHandoffDir, handoff)

	v := &views{watched: map[string]cmState{}, reconciled: map[string]cmState{}, listed: map[string]cmState{}}
	var round atomic.Int64
	newModule := func() *vigil.Module { return watchModule(name, home, data, apps, v, &round) }

	cm := func(n string, kv ...string) *corev1.ConfigMap {
		c := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: data, Name: n}, Data: map[string]string{}}
		for i := 0; i+1 < len(kv); i += 2 {
			c.Data[kv[i]] = kv[i+1]
		}
		return c
	}
	const objects = 8
	for i := range objects {
		if err := env.Client.Create(ctx, cm(fmt.Sprint("obj-", i), "v", "0")); err != nil {
			tb.Fatal(err)
		}
	}
	if err := env.Client.Create(ctx, cm("gate-target", "round", "0")); err != nil {
		tb.Fatal(err)
	}
	runGate := func() <-chan int {
		done := make(chan int, 1)
		go func() {
			done <- vigil.Execute(ctx, newModule(), []string{"gate", "--phase", "0", "--kubeconfig", kc, "--handoff-dir", handoff})
		}()
		return done
	}
	if code := <-runGate(); code != 0 {
		tb.Fatalf("the gate of round 0 exited %d", code)
	}
	ca, certDir := servingDir(tb)
	addr := vigiltest.FreeAddr(tb)
	runAdmission(tb, newModule(), addr, "--cert-dir", certDir, "--kubeconfig", kc, "--shutdown-delay", "0s", "--webhook-url", "https://"+addr)
	waitEnforced(tb, name)
	probe := vigiltest.FreeAddr(tb)
	wctx, wstop := context.WithCancel(context.Background())
	watcherDone := make(chan int, 1)
	go func() {
		watcherDone <- vigil.Execute(wctx, newModule(), []string{"watcher", "--kubeconfig", kc, "--metrics-addr=", "--probe-addr", probe})
	}()
	tb.Cleanup(func() {
		wstop()
		if code := <-watcherDone; code != 0 {
			tb.Errorf("the watcher exited %d", code)
		}
	})
	waitReady(tb, "http://"+probe+"/readyz", nil)

	// truth is the API server's view of the data namespace.
	truth := func() map[string]cmState {
		list := &corev1.ConfigMapList{}
		if err := env.Client.List(ctx, list, client.InNamespace(data)); err != nil {
			tb.Fatal(err)
		}
		out := map[string]cmState{}
		for i := range list.Items {
			out[list.Items[i].Name] = stateOf(&list.Items[i])
		}
		return out
	}
	// probeView has the admission role report its lister's view.
	probeView := func() error {
		c := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: "view"}}
		return env.Client.Create(ctx, c, client.DryRunAll)
	}
	// differ counts the names whose state in view differs from want; with
	// existingOnly, names want lacks are not counted.
	differ := func(view, want map[string]cmState, existingOnly bool) int {
		v.mu.Lock()
		defer v.mu.Unlock()
		n := 0
		for k, s := range want {
			if view[k] != s {
				n++
			}
		}
		if !existingOnly {
			for k := range view {
				if _, ok := want[k]; !ok {
					n++
				}
			}
		}
		return n
	}
	matched := func(want map[string]cmState) bool {
		if probeView() != nil {
			return false
		}
		return differ(v.watched, want, false) == 0 && differ(v.listed, want, false) == 0 && differ(v.reconciled, want, true) == 0
	}

	var res watchResult
	res.staleAfter = staleAfter
	faults := watchFaults
	if s := os.Getenv("SOAK_WATCH_FAULTS"); s != "" {
		faults = strings.Split(s, ",")
	}
	var detects, recovers []time.Duration
	// decide asks whether ConfigMap needs may be depended on, expecting
	// allowed; a decision against the data is stale, an error undecided.
	var decidedMu sync.Mutex
	decide := func(i int, needs string, allowed bool) {
		c := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: fmt.Sprintf("probe-%d-%s", i, needs), Labels: map[string]string{"needs": needs}}}
		err := env.Client.Create(ctx, c, client.DryRunAll)
		decidedMu.Lock()
		defer decidedMu.Unlock()
		res.decisions++
		switch {
		case err == nil:
			if !allowed {
				res.staleDecisions++
				tb.Errorf("round %d: a probe needing %s, deleted before, was allowed", i, needs)
			}
		case strings.Contains(err.Error(), "which does not exist"):
			if allowed {
				res.staleDecisions++
				tb.Errorf("round %d: a probe needing %s, created before, was denied: %v", i, needs, err)
			}
		default:
			res.undecided++ // the module could not decide: the failure policy answered
		}
	}
	// readyz asks the watcher's and the admission role's /readyz whether
	// they name their stale ConfigMap informer.
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}}}
	readyz := func() {
		for role, url := range map[string]string{"watcher": "http://" + probe + "/readyz", "admission": "https://" + addr + "/readyz"} {
			code, body := httpGet(hc, url)
			if code != http.StatusOK && strings.Contains(body, "ConfigMap in "+data) {
				if role == "watcher" {
					res.readyzNamedStale = true
				} else {
					res.admissionNamedStale = true
				}
			}
			if os.Getenv("SOAK_WATCH_DEBUG") != "" {
				tb.Logf("%s readyz %d %s", role, code, body)
			}
		}
	}

	for r := 1; r <= rounds && ctx.Err() == nil; r++ {
		fault := faults[(r-1)%len(faults)]
		round.Store(int64(r))
		gate := runGate()
		time.Sleep(500 * time.Millisecond) // the gate's watch is established
		before, noticed := stallsByRole(tb, name), map[string]bool{}
		began := time.Now()
		// notice records, per role, the first silence noticed since the
		// fault began, and returns how many roles have not noticed one.
		notice := func() (left int) {
			for role, n := range stallsByRole(tb, name) {
				switch {
				case noticed[role]:
				case n > before[role]:
					noticed[role] = true
					detects = append(detects, time.Since(began))
					tb.Logf("round %d (%s): the %s role noticed a silence after %s", r, fault, role, time.Since(began).Round(10*time.Millisecond))
				default:
					left++
				}
			}
			return left
		}
		var d time.Duration
		switch fault {
		case "stall":
			proxy.Stall()
		case "blackhole":
			d = 2 * staleAfter
			proxy.Blackhole(d)
		case "throttle":
			d = 3 * time.Second
			proxy.Throttle(d, time.Second)
			proxy.ExpireWatches(0) // the watches start again into the 429s
		case "expire":
			// Open watches end, and the next ones are answered 410 Gone, as
			// when the API server's history no longer holds their
			// resourceVersion: the informers list, then watch from there.
			d = 300 * time.Millisecond
			proxy.ExpireWatches(d)
		case "cut":
			proxy.Cut()
		}
		res.faults++
		var lastChange atomic.Int64
		changedNow := func() { lastChange.Store(time.Now().UnixNano()) }
		// Changes during the fault.
		if err := env.Client.Update(ctx, func() *corev1.ConfigMap {
			c := &corev1.ConfigMap{}
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: data, Name: "gate-target"}, c); err != nil {
				tb.Fatal(err)
			}
			c.Data["round"] = strconv.Itoa(r)
			return c
		}()); err != nil {
			tb.Fatal(err)
		}
		if fault == "blackhole" {
			n := fmt.Sprint("obj-", r%objects)
			if err := env.Client.Delete(ctx, cm(n)); err != nil {
				tb.Fatal(err)
			}
			if err := env.Client.Create(ctx, cm(n, "v", fmt.Sprint("recreated-", r))); err != nil {
				tb.Fatal(err)
			}
		}
		// Decisions during the fault, beside the changes: each may wait for
		// the webhook's timeout.
		// Each write is followed at once by a decision that depends on it,
		// made beside the rest: it may wait for the webhook's timeout.
		var decisions sync.WaitGroup
		if err := env.Client.Create(ctx, cm(fmt.Sprint("allow-", r))); err != nil {
			tb.Fatal(err)
		}
		changedNow()
		decisions.Go(func() { decide(r, fmt.Sprint("allow-", r), true) })
		if r > 1 {
			if err := env.Client.Delete(ctx, cm(fmt.Sprint("allow-", r-1))); err != nil {
				tb.Fatal(err)
			}
			changedNow()
			decisions.Go(func() { decide(r, fmt.Sprint("allow-", r-1), false) })
		}
		// Silences noticed, and the watcher's readiness, meanwhile: every
		// role with an informer notices within the bound and a bit.
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			if fault != "stall" && fault != "blackhole" {
				return
			}
			for deadline := began.Add(3 * staleAfter); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				if fault == "blackhole" && time.Since(began) < d {
					readyz()
				}
				if notice() == 0 && time.Since(began) > d {
					return
				}
			}
		}()
		// Objects change through the fault.
		changed := 0
		for end := began.Add(max(d, time.Second)); time.Now().Before(end) || changed < objects; changed++ {
			c := cm(fmt.Sprint("obj-", changed%objects))
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), c); err != nil {
				tb.Fatal(err)
			}
			c.Data = map[string]string{"v": fmt.Sprintf("%d.%d", r, changed)}
			if err := env.Client.Update(ctx, c); err != nil {
				tb.Fatal(err)
			}
			changedNow()
			time.Sleep(100 * time.Millisecond)
		}
		<-watched
		// Recovery counts from the fault's end (its start for a stall or a
		// cut), or from the last change made during it when that is later.
		ended := began.Add(d)
		if last := time.Unix(0, lastChange.Load()); last.After(ended) {
			ended = last
		}
		want := truth()
		var gateCode = -1
		recovered := false
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if gateCode < 0 {
				select {
				case gateCode = <-gate:
				default:
				}
			}
			if gateCode >= 0 && matched(want) {
				recovered = true
				break
			}
		}
		took := time.Since(ended)
		if !recovered {
			tb.Fatalf("round %d (%s): the roles did not match the API server within 60s of the fault's end: gate exit %d; watched %d differ, listed %d differ, reconciled %d differ; proxy %+v",
				r, fault, gateCode, differ(v.watched, want, false), differ(v.listed, want, false), differ(v.reconciled, want, true), proxy.Stats())
		}
		if gateCode != 0 {
			tb.Fatalf("round %d (%s): the gate exited %d", r, fault, gateCode)
		}
		decisions.Wait()
		recovers = append(recovers, took)
		if res.recoverBy == nil {
			res.recoverBy = map[string]time.Duration{}
		}
		res.recoverBy[fault] = max(res.recoverBy[fault], took)
		tb.Logf("round %d (%s): recovered %s after the fault's end", r, fault, took.Round(10*time.Millisecond))
	}
	// The final views.
	time.Sleep(time.Second)
	want := truth()
	if err := probeView(); err != nil {
		tb.Errorf("the last view probe: %v", err)
	}
	res.missedFinal = differ(v.watched, want, false) + differ(v.listed, want, false)
	res.reconcileMissed = differ(v.reconciled, want, true)
	res.detects = len(detects)
	res.detectP99, res.recoverP99, res.recoverMax = p99(detects), p99(recovers), slices.Max(append(recovers, 0))
	if res.missedFinal > 0 || res.reconcileMissed > 0 {
		tb.Errorf("missed_final_states=%d reconcile_missed=%d: want none", res.missedFinal, res.reconcileMissed)
	}
	stalls := 0
	for _, f := range faults[:min(rounds, len(faults))] {
		if f == "stall" || f == "blackhole" {
			stalls++
		}
	}
	if res.detects < 2*stalls {
		tb.Errorf("%d silences noticed over %d stalls and blackholes; want at least the watcher's and the admission role's for each", res.detects, stalls)
	}
	if rounds >= 2 && !res.readyzNamedStale {
		tb.Errorf("the watcher's /readyz never named its stale ConfigMap informer during a blackhole")
	}
	if rounds >= 2 && !res.admissionNamedStale {
		tb.Errorf("the admission role's /readyz never named its lister's stale ConfigMap informer during a blackhole")
	}
	if res.detectP99 > staleAfter+2*time.Second {
		tb.Errorf("stall_detect_p99=%s: want within the stale bound %s and a little", res.detectP99, staleAfter)
	}
	return res
}

func p99(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*99/100)]
}
