package watchhealth_test

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/vigilkit/vigil/internal/runtime/watchhealth"
	"github.com/vigilkit/vigil/vigiltest"
	"github.com/vigilkit/vigil/vigiltest/fault"
)

var env *vigiltest.Env

func TestMain(m *testing.M) {
	os.Exit(vigiltest.Run(m, vigiltest.Options{}, &env))
}

// informed is a ConfigMap informer of one namespace, through a fault proxy,
// followed by a tracker of the given stale bound.
type informed struct {
	proxy   *fault.Proxy
	tracker *watchhealth.Tracker
	record  *watchhealth.Informer
	inf     cache.SharedIndexInformer
	direct  *kubernetes.Clientset
	ns      string
}

func startInformer(t *testing.T, staleAfter time.Duration) *informed {
	t.Helper()
	ns := env.Namespace(t)
	p, err := fault.NewProxy(env.Config, fault.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	tr, err := watchhealth.New("m", "test", watchhealth.Options{StaleAfter: staleAfter, RestartAfter: 2 * staleAfter})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Close)
	cs, err := kubernetes.NewForConfig(tr.Instrument(p.Config()))
	if err != nil {
		t.Fatal(err)
	}
	direct, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	rec := tr.Informer("ConfigMap", "")
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return cs.CoreV1().ConfigMaps(ns).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return cs.CoreV1().ConfigMaps(ns).Watch(ctx, o)
		},
	}
	inf := cache.NewSharedIndexInformer(rec.Wrap(lw), &corev1.ConfigMap{}, 0, cache.Indexers{})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go inf.RunWithContext(ctx)
	if !cache.WaitForCacheSync(t.Context().Done(), inf.HasSynced) {
		t.Fatal("the informer did not sync")
	}
	return &informed{proxy: p, tracker: tr, record: rec, inf: inf, direct: direct, ns: ns}
}

// create makes a ConfigMap directly, not through the proxy.
func (i *informed) create(t *testing.T, name string) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: i.ns, Name: name}}
	if _, err := i.direct.CoreV1().ConfigMaps(i.ns).Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// seen waits until the informer holds the ConfigMap, and returns how long
// that took.
func (i *informed) seen(t *testing.T, name string, within time.Duration) time.Duration {
	t.Helper()
	began := time.Now()
	for time.Since(began) < within {
		if _, ok, _ := i.inf.GetStore().GetByKey(i.ns + "/" + name); ok {
			return time.Since(began)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("the informer did not see ConfigMap %s within %s: counts %+v, proxy %+v", name, within, i.record.Counts(), i.proxy.Stats())
	return 0
}

// A half-open connection (Stall: nothing more arrives, no error) is noticed
// within the stale bound; the watch is ended, the role's connections closed,
// and the informer watches again over a new one, from where it was.
func TestStalledWatchIsNoticedAndHealed(t *testing.T) {
	const bound = 2 * time.Second
	i := startInformer(t, bound)
	time.Sleep(300 * time.Millisecond) // the watch is established
	if n := i.proxy.Stall(); n < 1 {
		t.Fatalf("Stall held %d connections; want the informer's", n)
	}
	i.create(t, "during-stall")
	took := i.seen(t, "during-stall", 4*bound)
	c := i.record.Counts()
	t.Logf("stale bound %s: a ConfigMap created at the stall reached the informer after %s; counts %+v", bound, took.Round(10*time.Millisecond), c)
	if c.Stalls < 1 || c.Reconnects < 1 {
		t.Errorf("counts %+v: want the silence counted as a stall and the watch started again", c)
	}
	if took < bound/2 {
		t.Errorf("the ConfigMap arrived after %s, before any silence could be noticed: was the connection stalled?", took)
	}
	if took > bound+3*time.Second {
		t.Errorf("the stall was healed %s after it began; want within the bound %s and a new watch", took, bound)
	}
	if err := i.tracker.Check(); err != nil {
		t.Errorf("after healing, Check: %v", err)
	}
}

// Behind a blackhole the informer hears nothing: Check names it and since
// when, Live stays passing (no one is answered: a restart would not help),
// and once the network is back the informer has what was created meanwhile.
func TestBlackholeMakesTheInformerStale(t *testing.T) {
	const bound = 2 * time.Second
	i := startInformer(t, bound)
	i.proxy.Blackhole(3 * bound)
	i.create(t, "during-blackhole")
	var checked error
	for deadline := time.Now().Add(3 * bound); time.Now().Before(deadline) && checked == nil; time.Sleep(100 * time.Millisecond) {
		checked = i.tracker.Check()
	}
	if checked == nil || !strings.Contains(checked.Error(), "ConfigMap in "+i.ns) || !strings.Contains(checked.Error(), "since ") {
		t.Fatalf("Check during a blackhole: %v; want it to name the informer (ConfigMap in %s) and since when", checked, i.ns)
	}
	t.Logf("Check during the blackhole: %v", checked)
	if err := i.tracker.Live(); err != nil {
		t.Errorf("Live during a blackhole: %v; want it passing, as a restart would not help", err)
	}
	i.seen(t, "during-blackhole", 6*bound)
	if err := i.tracker.Check(); err != nil {
		t.Errorf("after the blackhole, Check: %v", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(watchhealth.Collector())
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	stalls := -1.0
	for _, f := range families {
		if f.GetName() != "vigil_informer_stalls_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "namespace" && l.GetValue() == i.ns {
					stalls = m.GetCounter().GetValue()
				}
			}
		}
	}
	if stalls < 1 {
		t.Errorf("vigil_informer_stalls_total for namespace %s = %v; want at least 1", i.ns, stalls)
	}
}

// Each 429 is counted, client-go's own retries included.
func TestThrottledAnswersAreCounted(t *testing.T) {
	i := startInformer(t, 5*time.Second)
	i.proxy.Throttle(1500*time.Millisecond, time.Second)
	i.proxy.ExpireWatches(0) // end the watch: the next one meets the 429s
	i.create(t, "after-throttling")
	i.seen(t, "after-throttling", 15*time.Second)
	t.Logf("counts %+v, proxy %+v", i.record.Counts(), i.proxy.Stats())
	if c := i.record.Counts(); c.Throttled < 1 || int(c.Throttled) > i.proxy.Stats().Throttled {
		t.Errorf("throttled %d; want between 1 and the proxy's %d", c.Throttled, i.proxy.Stats().Throttled)
	}
}

// Live fails only when a restart would help: an informer whose requests get
// no answer for RestartAfter while the role's other requests are answered.
func TestLiveFailsWhenOnlyTheInformerIsStuck(t *testing.T) {
	const bound = time.Second
	tr, err := watchhealth.New("m", "stuck", watchhealth.Options{StaleAfter: bound, RestartAfter: 2 * bound})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	cs, err := kubernetes.NewForConfig(tr.Instrument(env.Config))
	if err != nil {
		t.Fatal(err)
	}
	rec := tr.Informer("Widget", "")
	var once sync.Once
	hung := make(chan struct{})
	// A list-watch whose requests never get an answer: a wedged client.
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, _ metav1.ListOptions) (runtime.Object, error) {
			once.Do(func() { close(hung) })
			<-ctx.Done()
			return nil, ctx.Err()
		},
		WatchFuncWithContext: func(ctx context.Context, _ metav1.ListOptions) (watch.Interface, error) {
			once.Do(func() { close(hung) }) // a streaming list
			<-ctx.Done()
			return nil, ctx.Err()
		},
	}
	inf := cache.NewSharedIndexInformer(rec.Wrap(lw), &corev1.ConfigMap{}, 0, cache.Indexers{})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go inf.RunWithContext(ctx)
	<-hung
	if err := tr.Live(); err != nil {
		t.Fatalf("Live at once: %v", err)
	}
	var live error
	for deadline := time.Now().Add(6 * bound); time.Now().Before(deadline) && live == nil; time.Sleep(100 * time.Millisecond) {
		if _, err := cs.Discovery().ServerVersion(); err != nil { // the role's other requests are answered
			t.Fatal(err)
		}
		live = tr.Live()
	}
	if live == nil || !strings.Contains(live.Error(), "Widget") {
		t.Fatalf("Live with a stuck informer while the API server answers: %v; want it failing, naming Widget", live)
	}
	t.Logf("Live: %v", live)
	if c := rec.Counts(); c.Stalls < 1 {
		t.Errorf("counts %+v: want the unanswered lists counted as stalls", c)
	}
}

func TestStaleAfterFromEnv(t *testing.T) {
	t.Setenv(watchhealth.EnvStaleAfter, "")
	if d, err := watchhealth.StaleAfterFromEnv(); err != nil || d != watchhealth.DefaultStaleAfter {
		t.Errorf("unset: %s, %v; want the default", d, err)
	}
	t.Setenv(watchhealth.EnvStaleAfter, "12s")
	if d, err := watchhealth.StaleAfterFromEnv(); err != nil || d != 12*time.Second {
		t.Errorf("12s: %s, %v", d, err)
	}
	for _, bad := range []string{"soon", "3s"} {
		t.Setenv(watchhealth.EnvStaleAfter, bad)
		_, err := watchhealth.StaleAfterFromEnv()
		if err == nil || !strings.Contains(err.Error(), "at least 4s") || !strings.Contains(err.Error(), bad) {
			t.Errorf("%q: %v; want an error naming the value and what is expected", bad, err)
		}
	}
}
