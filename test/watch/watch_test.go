package watch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/testsupport/testkit"
	"github.com/vigilkit/vigil/vigiltest"
	"github.com/vigilkit/vigil/vigiltest/fault"
)

func createConfigMap(t testing.TB, c client.Client, ns, name string, data map[string]string) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}
	if err := c.Create(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	return cm
}

// A Watch sees the create, the update and the delete of one object, in
// order, each with the object as it was then.
func TestWatchSeesCreateUpdateDeleteInOrder(t *testing.T) {
	ns := env.Namespace(t)
	c := newClient(t)
	m := vigil.NewModule("watch-order", vigil.Options{Namespace: ns})
	var mu sync.Mutex
	var seen []string
	vigil.Watch(m.Capability("watch"), &corev1.ConfigMap{}).InNamespace(ns).WithName("target").OnEvent(func(ctx context.Context, cm *corev1.ConfigMap, ev vigil.WatchEvent) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, fmt.Sprintf("%s v=%s", ev, cm.Data["v"]))
	})
	testkit.RunWatcher(t, m, kubeconfig(t), "--leader-elect=false")

	createConfigMap(t, c, ns, "other", nil) // filtered out by name
	cm := createConfigMap(t, c, ns, "target", map[string]string{"v": "1"})
	cm.Data["v"] = "2"
	if err := c.Update(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	want := []string{"ADDED v=1", "MODIFIED v=2", "DELETED v=2"}
	testkit.Eventually(t, 10*time.Second, "three events", func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) >= 3 })
	// Exactly these three, and no fourth soon after.
	vigiltest.Consistently(t, 100*time.Millisecond, func() error {
		mu.Lock()
		defer mu.Unlock()
		if strings.Join(seen, "; ") != strings.Join(want, "; ") {
			return fmt.Errorf("events: got %q, want %q", seen, want)
		}
		return nil
	})
}

// A burst of 100 updates of one object collapses into a few reconciles of a
// 20 ms handler, and the last one sees the final resourceVersion.
func TestReconcileCollapsesBurst(t *testing.T) {
	ns := env.Namespace(t)
	c := newClient(t)
	m := vigil.NewModule("reconcile-burst", vigil.Options{Namespace: ns})
	var runs, running, overlaps atomic.Int32
	var last atomic.Value
	vigil.Watch(m.Capability("burst"), &corev1.ConfigMap{}).InNamespace(ns).
		Reconcile(func(ctx context.Context, cm *corev1.ConfigMap) error {
			if running.Add(1) > 1 {
				overlaps.Add(1)
			}
			defer running.Add(-1)
			runs.Add(1)
			time.Sleep(20 * time.Millisecond) // the scenario: a 20 ms handler
			last.Store(cm.ResourceVersion)
			return nil
		})
	cm := createConfigMap(t, c, ns, "burst", map[string]string{"n": "0"})
	testkit.RunWatcher(t, m, kubeconfig(t), "--leader-elect=false")
	testkit.Eventually(t, 10*time.Second, "first reconcile", func() bool { return last.Load() == cm.ResourceVersion })
	runs.Store(0)

	burstStart := time.Now()
	var wg sync.WaitGroup
	var final atomic.Value
	var maxRV atomic.Int64
	for w := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				patch := []byte(fmt.Sprintf(`{"data":{"w%d":"%d"}}`, w, i))
				obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "burst"}}
				if err := c.Patch(context.Background(), obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
					t.Error(err)
					return
				}
				var rv int64
				fmt.Sscan(obj.ResourceVersion, &rv)
				for {
					cur := maxRV.Load()
					if rv <= cur || maxRV.CompareAndSwap(cur, rv) {
						break
					}
				}
			}
		}()
	}
	wg.Wait()
	burst := time.Since(burstStart)
	final.Store(fmt.Sprint(maxRV.Load()))
	testkit.Eventually(t, 10*time.Second, "a reconcile of the final resourceVersion", func() bool { return last.Load() == final.Load() })
	// No further reconciles follow the final one.
	vigiltest.Consistently(t, 200*time.Millisecond, func() error {
		if n := runs.Load(); n > 10 {
			return fmt.Errorf("100 updates gave %d reconciles; want 1 to 10", n)
		}
		if last.Load() != final.Load() {
			return fmt.Errorf("the last reconcile saw resourceVersion %v, want the final %v", last.Load(), final.Load())
		}
		return nil
	})
	n := runs.Load()
	t.Logf("100 updates in %s, %d reconciles", burst.Round(time.Millisecond), n)
	if n > 10 || n < 1 {
		t.Fatalf("100 updates gave %d reconciles; want 1 to 10", n)
	}
	if last.Load() != final.Load() {
		t.Fatalf("the last reconcile saw resourceVersion %v, want the final %v", last.Load(), final.Load())
	}
	if overlaps.Load() > 0 {
		t.Fatalf("%d reconciles of one object ran at once", overlaps.Load())
	}
}

// An erroring reconcile is retried with growing delays; a Terminal error is
// not retried; RequeueAfter comes back after its delay; a panic is retried
// like an error.
func TestReconcileRetriesRequeuesAndRecovers(t *testing.T) {
	ns := env.Namespace(t)
	c := newClient(t)
	m := vigil.NewModule("reconcile-retry", vigil.Options{Namespace: ns})
	var mu sync.Mutex
	attempts := map[string][]time.Time{}
	vigil.Watch(m.Capability("retry"), &corev1.ConfigMap{}).InNamespace(ns).
		Reconcile(func(ctx context.Context, cm *corev1.ConfigMap) error {
			mu.Lock()
			attempts[cm.Name] = append(attempts[cm.Name], time.Now())
			n := len(attempts[cm.Name])
			mu.Unlock()
			switch cm.Name {
			case "failing":
				if n <= 7 {
					return errors.New("not yet")
				}
			case "terminal":
				return vigil.Terminal(errors.New("cannot be fixed by retrying"))
			case "requeue":
				if n == 1 {
					return vigil.RequeueAfter(400 * time.Millisecond)
				}
			case "panics":
				if n == 1 {
					panic("handler bug")
				}
			}
			return nil
		})
	testkit.RunWatcher(t, m, kubeconfig(t), "--leader-elect=false")
	for _, name := range []string{"failing", "terminal", "requeue", "panics"} {
		createConfigMap(t, c, ns, name, nil)
	}
	count := func(name string) int { mu.Lock(); defer mu.Unlock(); return len(attempts[name]) }
	testkit.Eventually(t, 20*time.Second, "8 attempts of the failing reconcile", func() bool { return count("failing") >= 8 })
	testkit.Eventually(t, 10*time.Second, "the requeue", func() bool { return count("requeue") >= 2 })
	testkit.Eventually(t, 10*time.Second, "the retry after the panic", func() bool { return count("panics") >= 2 })
	testkit.Eventually(t, 10*time.Second, "the terminal error's attempt", func() bool { return count("terminal") >= 1 })
	// Then nothing more is tried: no retry after success or a terminal error,
	// no second requeue.
	vigiltest.Consistently(t, time.Second, func() error {
		for name, most := range map[string]int{"failing": 8, "terminal": 1, "requeue": 2, "panics": 2} {
			if n := count(name); n > most {
				return fmt.Errorf("the %s reconcile ran %d times; want %d", name, n, most)
			}
		}
		return nil
	})

	mu.Lock()
	defer mu.Unlock()
	at := attempts["failing"]
	var gaps []time.Duration
	for i := 1; i < len(at); i++ {
		gaps = append(gaps, at[i].Sub(at[i-1]))
	}
	t.Logf("retry gaps: %v", gaps)
	if len(at) != 8 {
		t.Errorf("the failing reconcile ran %d times; want 8 (7 errors, then success, then no more)", len(at))
	}
	// Exponential back-off: 5ms, 10ms, 20ms ... 320ms.
	if gaps[len(gaps)-1] < 4*gaps[1] || gaps[len(gaps)-1] < 200*time.Millisecond {
		t.Errorf("retry delays did not grow: %v", gaps)
	}
	if n := len(attempts["terminal"]); n != 1 {
		t.Errorf("a terminal error was tried %d times; want 1", n)
	}
	rq := attempts["requeue"]
	if len(rq) != 2 || rq[1].Sub(rq[0]) < 400*time.Millisecond {
		t.Errorf("RequeueAfter(400ms): attempts at %v", rq)
	}
	if n := len(attempts["panics"]); n != 2 {
		t.Errorf("the panicking reconcile ran %d times; want 2 (panic, then success)", n)
	}
}

// A Reconcile handler's object is its own to change: what it changes stays
// out of the watcher's cache, so a requeued Reconcile of the same object,
// with nothing new from the API server, gets it as the API server has it.
func TestAReconcileHandlerMayChangeTheObjectItGets(t *testing.T) {
	ns := env.Namespace(t)
	c := newClient(t)
	m := vigil.NewModule("reconcile-scribble", vigil.Options{Namespace: ns})
	var mu sync.Mutex
	var got []corev1.ConfigMap
	vigil.Watch(m.Capability("scribble"), &corev1.ConfigMap{}).InNamespace(ns).
		Reconcile(func(ctx context.Context, cm *corev1.ConfigMap) error {
			mu.Lock()
			got = append(got, *cm.DeepCopy())
			n := len(got)
			mu.Unlock()
			cm.Data["scribbled"] = "by the handler"
			cm.Labels = map[string]string{"scribbled": "yes"}
			if n == 1 {
				return vigil.RequeueAfter(200 * time.Millisecond)
			}
			return nil
		})
	testkit.RunWatcher(t, m, kubeconfig(t), "--leader-elect=false")
	createConfigMap(t, c, ns, "mine", map[string]string{"a": "1"})
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(got) }
	testkit.Eventually(t, 10*time.Second, "the requeued Reconcile", func() bool { return count() >= 2 })
	mu.Lock()
	defer mu.Unlock()
	if got[0].ResourceVersion != got[1].ResourceVersion {
		t.Fatalf("the object changed between the two Reconciles (resourceVersion %s, then %s); want the requeue alone", got[0].ResourceVersion, got[1].ResourceVersion)
	}
	for i, cm := range got {
		if _, ok := cm.Data["scribbled"]; ok || cm.Labels["scribbled"] != "" {
			t.Errorf("Reconcile %d got data %v and labels %v: the handler's own changes, kept in the cache; want the object as the API server has it", i+1, cm.Data, cm.Labels)
		}
	}
}

// A declared Backoff is the retry delay: its first delay after the first
// failure, doubling, held at its maximum; a success ends the retries.
func TestReconcileBackoffIsTheDeclaredOne(t *testing.T) {
	ns := env.Namespace(t)
	c := newClient(t)
	m := vigil.NewModule("reconcile-backoff", vigil.Options{Namespace: ns})
	var mu sync.Mutex
	var at []time.Time
	vigil.Watch(m.Capability("retry"), &corev1.ConfigMap{}).InNamespace(ns).
		Backoff(300*time.Millisecond, 600*time.Millisecond).
		Reconcile(func(ctx context.Context, cm *corev1.ConfigMap) error {
			mu.Lock()
			defer mu.Unlock()
			at = append(at, time.Now())
			if len(at) <= 5 {
				return errors.New("not yet")
			}
			return nil
		})
	testkit.RunWatcher(t, m, kubeconfig(t), "--leader-elect=false")
	createConfigMap(t, c, ns, "failing", nil)
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(at) }
	testkit.Eventually(t, 20*time.Second, "6 attempts", func() bool { return count() >= 6 })
	vigiltest.Consistently(t, 2*time.Second, func() error {
		if n := count(); n != 6 {
			return fmt.Errorf("the reconcile ran %d times; want 6 (5 failures, then success, then no more)", n)
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	var gaps []time.Duration
	for i := 1; i < len(at); i++ {
		gaps = append(gaps, at[i].Sub(at[i-1]))
	}
	t.Logf("retry gaps with Backoff(300ms, 600ms): %v", gaps)
	// Without the cap the delays would be 300ms, 600ms, 1.2s, 2.4s, 4.8s.
	for i, want := range []time.Duration{300, 600, 600, 600, 600} {
		want *= time.Millisecond
		if gaps[i] < want-20*time.Millisecond {
			t.Errorf("retry %d came %s after the failure; want at least %s", i+1, gaps[i], want)
		}
	}
	if gaps[4] > 2*time.Second {
		t.Errorf("the fifth retry came %s after the failure: the 600ms maximum did not hold", gaps[4])
	}
}

// Finalize puts its finalizer on objects that existed before the module
// started and on new ones, which the module's own OnEvent on them is not
// told of as a change; a deleted object stays while the handler fails and
// goes once it succeeds; `unregister --remove-finalizers` strips the rest.
func TestFinalizeHoldsDeletionUntilHandlerSucceeds(t *testing.T) {
	ns := env.Namespace(t)
	c := newClient(t)
	const module = "finalize"
	m := vigil.NewModule(module, vigil.Options{Namespace: ns})
	var allow atomic.Bool
	var calls, modified atomic.Int32
	cleanup := m.Capability("cleanup")
	vigil.Watch(cleanup, &corev1.ConfigMap{}).InNamespace(ns).WithLabel("cleanup").Named("changes").
		OnEvent(func(_ context.Context, cm *corev1.ConfigMap, _ vigil.WatchEvent) {
			if cm.Name == "after" {
				modified.Add(1)
			}
		}, vigil.EventModified)
	vigil.Watch(cleanup, &corev1.ConfigMap{}).InNamespace(ns).WithLabel("cleanup").Named("configmaps").
		Finalize(func(ctx context.Context, cm *corev1.ConfigMap) error {
			calls.Add(1)
			if !allow.Load() {
				return errors.New("the external resource is still in use")
			}
			return nil
		})
	before := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "before", Labels: map[string]string{"cleanup": "yes"}}}
	if err := c.Create(t.Context(), before); err != nil {
		t.Fatal(err)
	}
	createConfigMap(t, c, ns, "unlabelled", nil)
	stop := testkit.RunWatcher(t, m, kubeconfig(t), "--leader-elect=false")
	after := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "after", Labels: map[string]string{"cleanup": "yes"}}}
	if err := c.Create(t.Context(), after); err != nil {
		t.Fatal(err)
	}
	finalizer := "finalize.vigil.dev/cleanup.configmaps"
	hasFinalizer := func(name string) bool {
		cm := &corev1.ConfigMap{}
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, cm); err != nil {
			return false
		}
		for _, f := range cm.Finalizers {
			if f == finalizer {
				return true
			}
		}
		return false
	}
	testkit.Eventually(t, 10*time.Second, "finalizer on the object that existed before", func() bool { return hasFinalizer("before") })
	testkit.Eventually(t, 10*time.Second, "finalizer on the new object", func() bool { return hasFinalizer("after") })
	if hasFinalizer("unlabelled") {
		t.Fatal("an object the binding does not select got its finalizer")
	}
	time.Sleep(time.Second) // the update that added it has reached every handler
	if n := modified.Load(); n != 0 {
		t.Fatalf("OnEvent(EventModified) was told %d times of the finalizer the module itself added", n)
	}

	if err := c.Delete(t.Context(), before); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "failing finalize calls", func() bool { return calls.Load() >= 3 })
	got := &corev1.ConfigMap{}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(before), got); err != nil {
		t.Fatalf("the object went while its finalize handler failed: %v", err)
	}
	if got.DeletionTimestamp == nil {
		t.Fatal("the deleted object has no deletionTimestamp")
	}
	allow.Store(true)
	testkit.Eventually(t, 10*time.Second, "deletion after the handler succeeds", func() bool {
		return apierrors.IsNotFound(c.Get(context.Background(), client.ObjectKeyFromObject(before), &corev1.ConfigMap{}))
	})

	// Uninstall: with the watcher gone, the remaining finalizer is stripped.
	stop()
	out := &strings.Builder{}
	code := vigil.Execute(t.Context(), m, []string{"unregister", "--remove-finalizers", "--kubeconfig", kubeconfig(t)})
	if code != 0 {
		t.Fatalf("unregister --remove-finalizers exited %d %s", code, out)
	}
	if hasFinalizer("after") {
		t.Fatal("unregister --remove-finalizers left the finalizer")
	}
	if err := c.Delete(t.Context(), after); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, "deletion without the module", func() bool {
		return apierrors.IsNotFound(c.Get(context.Background(), client.ObjectKeyFromObject(after), &corev1.ConfigMap{}))
	})
}

// OnSchedule runs on its ticks, and a run that outlasts a tick is not
// started twice: the tick is skipped.
func TestOnScheduleRunsOnTimeWithoutOverlap(t *testing.T) {
	ns := env.Namespace(t)
	m := vigil.NewModule("schedule", vigil.Options{Namespace: ns})
	type run struct{ start, end time.Time }
	var mu sync.Mutex
	var runs []run
	var running atomic.Int32
	var overlaps atomic.Int32
	m.OnSchedule("tick", vigil.Every(200*time.Millisecond), func(ctx context.Context) error {
		if running.Add(1) > 1 {
			overlaps.Add(1)
		}
		defer running.Add(-1)
		start := time.Now()
		mu.Lock()
		n := len(runs)
		mu.Unlock()
		if n == 2 {
			time.Sleep(500 * time.Millisecond) // outlasts two ticks
		}
		if vigil.StoreFrom(ctx) == nil {
			t.Error("a schedule's context carries no Store")
		}
		want := strings.TrimSuffix(env.Config.Host, "/")
		if cfg := vigil.ConfigFrom(ctx); cfg == nil || strings.TrimSuffix(cfg.Host, "/") != want {
			t.Errorf("a schedule's context carries no config of the watcher's API server, %s", want)
		}
		mu.Lock()
		runs = append(runs, run{start, time.Now()})
		mu.Unlock()
		return nil
	})
	began := time.Now()
	testkit.RunWatcher(t, m, kubeconfig(t), "--leader-elect=false")
	testkit.Eventually(t, 10*time.Second, "six runs", func() bool { mu.Lock(); defer mu.Unlock(); return len(runs) >= 6 })
	mu.Lock()
	defer mu.Unlock()
	if overlaps.Load() > 0 {
		t.Fatalf("%d runs overlapped", overlaps.Load())
	}
	for i, r := range runs[:6] {
		// Runs start on the 200 ms grid: offsets from the first are
		// multiples of 200 ms, give or take scheduling.
		off := r.start.Sub(runs[0].start)
		rem := off % (200 * time.Millisecond)
		if rem > 60*time.Millisecond && rem < 140*time.Millisecond {
			t.Errorf("run %d started %s after the first: off the 200ms grid", i, off)
		}
		if i > 0 && r.start.Before(runs[i-1].end) {
			t.Errorf("run %d started before run %d ended", i, i-1)
		}
	}
	// The long third run (500 ms) makes the next start on the grid after it.
	if gap := runs[3].start.Sub(runs[2].start); gap < 500*time.Millisecond || gap > 800*time.Millisecond {
		t.Errorf("after a 500ms run the next started %s later; want the next tick, 600ms", gap)
	}
	if first := runs[0].start.Sub(began); first > 3*time.Second {
		t.Errorf("the first run came %s after start", first)
	}
}

// Mistakes in watches and schedules are reported before anything starts,
// with the call site.
func TestWatchDefinitionMistakes(t *testing.T) {
	m := vigil.NewModule("mistakes", vigil.Options{})
	c := m.Capability("c")
	// A Finalize after IsCreated does not compile: see
	// TestInvalidDeclarationsDoNotCompile.
	m.OnSchedule("bad-cron", vigil.Cron("every five minutes"), func(context.Context) error { return nil })
	m.OnSchedule("zero", vigil.Every(0), func(context.Context) error { return nil })
	m.OnSchedule("twice", vigil.Cron("*/5 * * * *"), func(context.Context) error { return nil })
	m.OnSchedule("twice", vigil.Every(time.Minute), func(context.Context) error { return nil })
	vigil.Watch(c, &corev1.ConfigMap{}).Named("same").Reconcile(func(context.Context, *corev1.ConfigMap) error { return nil })
	vigil.Watch(c, &corev1.ConfigMap{}).Named("same").Reconcile(func(context.Context, *corev1.ConfigMap) error { return nil })
	err := m.Verify()
	if err == nil {
		t.Fatal("no mistakes reported")
	}
	for _, want := range []string{
		"watch_test.go:",
		`Cron("every five minutes"): expected five fields`,
		`Every(0s): expected a positive interval`,
		`schedule "twice" is already declared at watch_test.go:`,
		`reconcile binding "same" of capability "c" is already declared`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("mistakes lack %q:\n%v", want, err)
		}
	}
}

// An API server outage in the middle of the stream, and a forced 410 Gone on
// resume: no change is lost; the final state of every object is reconciled,
// and deletions are seen.
func TestWatcherSurvivesOutageAndGone(t *testing.T) {
	gone, err := vigiltest.Start(vigiltest.Options{DisableWatchCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gone.Stop() })
	ctx := t.Context()
	ns := gone.Namespace(t)
	c, err := client.New(gone.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := fault.NewProxy(gone.Config, fault.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })

	m := vigil.NewModule("outage", vigil.Options{Namespace: ns})
	var mu sync.Mutex
	reconciled := map[string]string{} // name → data v last reconciled
	lastEvent := map[string]vigil.WatchEvent{}
	cap := m.Capability("state")
	vigil.Watch(cap, &corev1.ConfigMap{}).InNamespace(ns).WithLabel("tracked").
		Reconcile(func(ctx context.Context, cm *corev1.ConfigMap) error {
			mu.Lock()
			reconciled[cm.Name] = cm.Data["v"]
			mu.Unlock()
			return nil
		})
	vigil.Watch(cap, &corev1.ConfigMap{}).InNamespace(ns).WithLabel("tracked").OnEvent(func(ctx context.Context, cm *corev1.ConfigMap, ev vigil.WatchEvent) {
		mu.Lock()
		lastEvent[cm.Name] = ev
		mu.Unlock()
	})
	metrics := vigiltest.FreeAddr(t)
	testkit.RunWatcher(t, m, vigiltest.WriteKubeConfig(t, proxy.Config()), "--leader-elect=false", "--metrics-addr", metrics)

	put := func(name, v string) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"tracked": "yes"}}, Data: map[string]string{"v": v}}
		err := c.Create(ctx, cm)
		if apierrors.IsAlreadyExists(err) {
			err = c.Patch(ctx, cm, client.RawPatch(types.MergePatchType, []byte(`{"data":{"v":"`+v+`"}}`)))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]string{}
	for i := range 10 {
		name := fmt.Sprint("cm-", i)
		put(name, "1")
		want[name] = "1"
	}
	settled := func() bool {
		mu.Lock()
		defer mu.Unlock()
		for name, v := range want {
			if reconciled[name] != v || lastEvent[name] == vigil.EventDeleted {
				return false
			}
		}
		return true
	}
	testkit.Eventually(t, 10*time.Second, "the first state reconciled", settled)
	// client-go relists at once after a watch that lasted under a second; an
	// older one resumes from its resourceVersion, which the compaction expires.
	// This sleep is part of the scenario: it ages the watch past that second.
	time.Sleep(1100 * time.Millisecond)

	cut := proxy.Outage(3 * time.Second)
	for i := range 10 {
		name := fmt.Sprint("cm-", i)
		switch {
		case i < 3:
			if err := c.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
				t.Fatal(err)
			}
			delete(want, name)
		default:
			put(name, "2")
			want[name] = "2"
		}
	}
	for i := range 5 {
		name := fmt.Sprint("new-", i)
		put(name, "3")
		want[name] = "3"
	}
	if _, err := gone.CompactEtcd(ctx); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "the final state reconciled after the outage", settled)
	mu.Lock()
	for i := range 3 {
		if ev := lastEvent[fmt.Sprint("cm-", i)]; ev != vigil.EventDeleted {
			t.Errorf("cm-%d was deleted during the outage; the watch's last event for it is %q", i, ev)
		}
	}
	mu.Unlock()
	if cut == 0 {
		t.Fatal("the outage cut no connection")
	}
	body := testkit.Scrape(t, "http://"+metrics+"/metrics")
	if !strings.Contains(body, `vigil_watch_errors_total{module="outage",reason="expired"}`) {
		t.Errorf("no expired (410) watch counted after the compaction:\n%s", testkit.GrepLines(body, "vigil_watch"))
	}
	for _, want := range []string{
		`controller_runtime_reconcile_total{controller="outage.state.configmap-reconcile-0",result="success"}`,
		`workqueue_depth{controller="outage.state.configmap-reconcile-0"`,
		`controller_runtime_reconcile_time_seconds_count{controller="outage.state.configmap-reconcile-0"}`,
		`vigil_watch_events_total{binding="state/configmap-watch-1",event="DELETED",module="outage"}`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// A Lister is a live read cache: an admission handler consults it on every
// request, so a new exemption takes effect without a restart, and a Reconcile
// handler reads other objects through it. Before a role starts it, it says so.
func TestListerServesAdmissionAndWatcherLive(t *testing.T) {
	ns := env.Namespace(t)
	c := newClient(t)
	m := vigil.NewModule("lister", vigil.Options{Namespace: ns})
	secrets := vigil.NewLister(m, &corev1.Secret{})
	if _, err := secrets.List(t.Context()); err == nil || !strings.Contains(err.Error(), "lister of Secret is not started") {
		t.Fatalf("a lister before start: got %v, want an error saying it is not started", err)
	}
	policy := m.Capability("policy")
	vigil.When(policy, &corev1.ConfigMap{}).IsCreated().WithLabel("guarded").
		Validate(func(ctx context.Context, r *vigil.Request[*corev1.ConfigMap]) vigil.Verdict {
			if _, err := secrets.Get(ctx, r.Namespace, "exempt-"+r.Name); err == nil {
				return admission.Allow()
			} else if !apierrors.IsNotFound(err) {
				return admission.Deny(err.Error())
			}
			return admission.Deny("no exemption for " + r.Name)
		})
	var mirrored atomic.Int32
	vigil.Watch(policy, &corev1.ConfigMap{}).InNamespace(ns).WithLabel("mirror").
		Reconcile(func(ctx context.Context, cm *corev1.ConfigMap) error {
			list, err := secrets.List(ctx, client.InNamespace(ns), client.MatchingLabels{"team": "shop"})
			if err != nil {
				return err
			}
			mirrored.Store(int32(len(list)))
			return nil
		})
	serveAdmission(t, m, "lister", []string{ns})

	guarded := func(name string, opts ...client.CreateOption) error {
		return c.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"guarded": "yes"}}}, opts...)
	}
	// The API server takes in a new webhook configuration within a moment:
	// dry runs show when it calls the module.
	testkit.Eventually(t, 10*time.Second, "the API server to call the module's webhook", func() bool {
		err := guarded("app", client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), "no exemption for app")
	})
	if err := guarded("app"); err == nil || !strings.Contains(err.Error(), "no exemption for app") {
		t.Fatalf("without an exemption: got %v, want the denial", err)
	}
	if err := c.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "exempt-app"}}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, "the new exemption admits the object", func() bool { return guarded("app") == nil })

	for i := range 3 {
		if err := c.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprint("shop-", i), Labels: map[string]string{"team": "shop"}}}); err != nil {
			t.Fatal(err)
		}
	}
	testkit.RunWatcher(t, m, kubeconfig(t), "--leader-elect=false")
	createConfigMap(t, c, ns, "mirror", nil)
	if err := c.Patch(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mirror"}}, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"mirror":"yes"}}}`))); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the reconcile lists the three labelled Secrets through the lister", func() bool { return mirrored.Load() == 3 })
}

// `plan` shows the watcher's bindings, finalizers, schedules, and what each
// shared informer selects: the namespaces every user of a type agrees on.
func TestPlanShowsWatcher(t *testing.T) {
	m := vigil.NewModule("planned", vigil.Options{})
	apps := m.Capability("apps", vigil.InNamespaces("shop", "web"))
	vigil.Watch(apps, &corev1.ConfigMap{}).Named("sync").Reconcile(func(context.Context, *corev1.ConfigMap) error { return nil })
	vigil.Watch(apps, &corev1.ConfigMap{}).Named("cleanup").Finalize(func(context.Context, *corev1.ConfigMap) error { return nil })
	vigil.Watch(m.Capability("audit"), &corev1.Pod{}).WithLabelValue("team", "shop").OnEvent(func(context.Context, *corev1.Pod, vigil.WatchEvent) {})
	vigil.NewLister(m, &corev1.Secret{})
	vigil.NewLister(m, vigil.Metadata("", "v1", "Node"))
	m.OnSchedule("nightly", vigil.Cron("0 3 * * *"), func(context.Context) error { return nil })
	out := testkit.CaptureStdout(t, func() {
		if code := vigil.Execute(t.Context(), m, []string{"plan"}); code != 0 {
			t.Errorf("plan exit %d", code)
		}
	})
	for _, want := range []string{
		"watcher (one active replica, by leader election):",
		"apps/sync reconcile ConfigMap (watch_test.go:",
		"apps/cleanup finalize ConfigMap (finalizer planned.vigil.dev/apps.cleanup, put on as objects are created by MutatingAdmissionPolicy planned-finalizer-apps.cleanup where the cluster serves it by default (Kubernetes 1.36 on), else by the watcher once it sees them) (watch_test.go:",
		"audit/pod-watch-2 watch Pod, label team=shop (watch_test.go:",
		"schedule nightly 0 3 * * *, a missed tick made up once; state in the Store as vigil.schedule.nightly (watch_test.go:",
		"ConfigMap: namespaces shop,web; holds whole objects, managed fields dropped",
		"Pod: labels team=shop",
		"Secret: everything, cluster-wide",
		"Node: everything, cluster-wide; holds metadata only (vigil.Metadata)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}
}

// `plan -o json` is the plan for tools: phases with their init containers,
// capabilities and the watcher.
func TestPlanJSON(t *testing.T) {
	m := vigil.NewModule("planned", vigil.Options{})
	_, _, line, _ := goruntime.Caller(0)
	vigil.WaitFor(m, &corev1.ConfigMap{}).InNamespace("apps").WithName("settings").InPhase(1).ToBeCreated(nil)
	vigil.Watch(m.Capability("apps"), &corev1.ConfigMap{}).Named("sync").Reconcile(func(context.Context, *corev1.ConfigMap) error { return nil })
	out := testkit.CaptureStdout(t, func() {
		if code := vigil.Execute(t.Context(), m, []string{"plan", "-o", "json"}); code != 0 {
			t.Errorf("plan -o json exit %d", code)
		}
	})
	var p struct {
		Module string
		Phases []struct {
			Phase         int
			InitContainer string
			Gates         []struct{ Name, WaitsFor, Site string }
		}
		Watches []struct{ Name string }
	}
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("plan -o json is not JSON: %v\n%s", err, out)
	}
	if p.Module != "planned" || len(p.Phases) != 1 || p.Phases[0].Phase != 1 || p.Phases[0].InitContainer != "gate-phase-1" ||
		len(p.Phases[0].Gates) != 1 || len(p.Watches) != 1 {
		t.Fatalf("plan -o json: %s", out)
	}
	if want := fmt.Sprintf("watch_test.go:%d", line+1); p.Phases[0].Gates[0].Site != want {
		t.Fatalf("the gate's site is %s, want %s (its WaitFor call)", p.Phases[0].Gates[0].Site, want)
	}
}

// A Watch handler that panics gets the event again, and the events behind it
// wait, so that order holds.
func TestWatchPanicIsRetriedInOrder(t *testing.T) {
	ns := env.Namespace(t)
	c := newClient(t)
	m := vigil.NewModule("watch-panic", vigil.Options{Namespace: ns})
	var mu sync.Mutex
	var seen []string
	panics := 0
	vigil.Watch(m.Capability("watch"), &corev1.ConfigMap{}).InNamespace(ns).WithName("target").OnEvent(func(ctx context.Context, cm *corev1.ConfigMap, ev vigil.WatchEvent) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, string(ev))
		if ev == vigil.EventModified && panics < 2 {
			panics++
			panic("handler bug")
		}
	})
	testkit.RunWatcher(t, m, kubeconfig(t), "--leader-elect=false")
	cm := createConfigMap(t, c, ns, "target", map[string]string{"v": "1"})
	cm.Data["v"] = "2"
	if err := c.Update(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "five deliveries", func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) >= 5 })
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(seen, " "); got != "ADDED MODIFIED MODIFIED MODIFIED DELETED" {
		t.Fatalf("deliveries %q; want the MODIFIED retried twice after its panics, before the DELETED", got)
	}
}
