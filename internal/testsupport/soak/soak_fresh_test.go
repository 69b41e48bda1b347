package soak_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/commands/modcli"
	"github.com/vigilkit/vigil/internal/serving/registration"
	"github.com/vigilkit/vigil/vigiltest"
	"github.com/vigilkit/vigil/vigiltest/fault"
)

// verdicts records, per admission request, what the privileged-Pod policy
// decided on its first run — a plain cache read — and when it ran again on
// fresh data.
type verdicts struct {
	mu    sync.Mutex
	first map[string]bool // pod name → allowed by the plain cache read
	ended map[string]time.Time
	waits []time.Duration // first run's end to the recheck's start
}

func (v *verdicts) note(uid, pod string, allowed bool, began time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if end, ok := v.ended[uid]; ok {
		v.waits = append(v.waits, began.Sub(end))
		return
	}
	v.ended[uid] = time.Now()
	v.first[pod] = allowed
}

func (v *verdicts) plain(pod string) (allowed, seen bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	allowed, seen = v.first[pod]
	return allowed, seen
}

func (v *verdicts) p99() time.Duration {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.waits) == 0 {
		return 0
	}
	w := slices.Clone(v.waits)
	slices.Sort(w)
	return w[min(len(w)-1, len(w)*99/100)]
}

// BenchmarkSoakFresh (make soak-fresh): a module's listers behind an API
// server connection whose watch events are held back, so its cache lags.
// SOAK_FRESH_TRIALS times (1,000 by default) an Exemption is created and at
// once a privileged Pod it exempts; as many times an Exemption is deleted and
// at once a Pod it used to exempt is created. No decision may rest on the
// lagging cache: none of the first Pods denied, none of the second allowed.
// The stale_cache_* figures are what the same run's plain cache reads
// decided — what the module would have answered without rechecks.
// Run with -benchtime 1x.
func BenchmarkSoakFresh(b *testing.B) {
	r := soakFresh(b, envCount(b, "SOAK_FRESH_TRIALS", 1000), 16, 10*time.Minute, listInNamespace)
	fmt.Printf("fresh: trials=%d false_denials=%d stale_allows=%d stale_cache_false_denials=%d stale_cache_allows=%d recheck_p99=%dms\n",
		r.trials, r.falseDenials, r.staleAllows, r.plainDenials, r.plainAllows, r.recheckP99.Milliseconds())
}

// The same, in a few trials: decisions whose outcome the lagging cache would
// change are made on fresh data.
func TestAdmissionDecidesOnFreshListerData(t *testing.T) {
	r := soakFresh(t, 8, 4, 2*time.Minute, listInNamespace)
	t.Logf("trials=%d stale_cache_false_denials=%d stale_cache_allows=%d recheck_p99=%s", r.trials, r.plainDenials, r.plainAllows, r.recheckP99)
}

// The same through a lister scoped with InNamespace to the exemptions
// namespace: its informer (one per namespace behind the cache) is caught up
// by the same re-check, and it reads nothing of the namespace where the
// tenant writes her own Exemptions, though the handler lists with no
// namespace.
func TestScopedListerDecidesOnFreshDataOfItsNamespacesOnly(t *testing.T) {
	r := soakFresh(t, 8, 4, 2*time.Minute, scopedLister)
	t.Logf("trials=%d stale_cache_false_denials=%d stale_cache_allows=%d recheck_p99=%s", r.trials, r.plainDenials, r.plainAllows, r.recheckP99)
}

// The same with the handler reading its Exemption by key: the recheck
// reads that one name from the API server, and catches the cache up on it
// alone — a created Exemption it did not hold yet, a deleted one it still
// holds.
func TestAReadByKeyDecidesOnFreshDataOfThatObject(t *testing.T) {
	r := soakFresh(t, 8, 4, 2*time.Minute, getByKey)
	t.Logf("trials=%d stale_cache_false_denials=%d stale_cache_allows=%d recheck_p99=%s", r.trials, r.plainDenials, r.plainAllows, r.recheckP99)
}

// freshRead is how soakFresh's handler reads the Exemptions.
type freshRead int

const (
	// listInNamespace lists the exemptions namespace through a
	// cluster-wide lister.
	listInNamespace freshRead = iota
	// scopedLister lists with no namespace through a lister scoped with
	// InNamespace to the exemptions namespace; the pods' own namespace
	// holds an Exemption for every pod, which must exempt none.
	scopedLister
	// getByKey reads trial i's Exemption, ex-i, by its key.
	getByKey
)

type freshResult struct {
	trials, falseDenials, staleAllows, plainDenials, plainAllows int64
	recheckP99                                                   time.Duration
}

// soakFresh runs trials of each kind on workers within budget, failing t if
// any decision rested on stale data, a request failed, or the cache never
// lagged (then the run proves nothing). read is how the handler reads the
// Exemptions.
func soakFresh(b testing.TB, trials, workers int, budget time.Duration, read freshRead) freshResult {
	const watchDelay = 250 * time.Millisecond
	ctx, cancel := context.WithTimeout(b.Context(), budget)
	defer cancel()
	crds, err := os.ReadFile("../../../examples/clusterconfig/crds.yaml")
	if err != nil {
		b.Fatal(err)
	}
	if err := env.InstallCRDYAML(crds); err != nil {
		b.Fatal(err)
	}
	home, apps, exns := env.Namespace(b), env.Namespace(b), env.Namespace(b)
	name := "fresh-" + home[len(home)-6:]
	bootstrapConfigs(b, name)

	proxy, err := fault.NewProxy(env.Config, fault.Options{WatchDelay: watchDelay})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { proxy.Close() })

	rec := &verdicts{first: map[string]bool{}, ended: map[string]time.Time{}}
	m := vigil.NewModule(name, vigil.Options{Namespace: home})
	exemptions := vigil.NewLister(m, vigil.Kind("uds.dev", "v1alpha1", "Exemption"))
	var opts []client.ListOption
	switch read {
	case scopedLister:
		exemptions.InNamespace(exns)
	case listInNamespace:
		opts = append(opts, client.InNamespace(exns))
	}
	// exemptionsOf reads the Exemptions that may exempt pod.
	exemptionsOf := func(ctx context.Context, pod string) ([]*unstructured.Unstructured, error) {
		if read != getByKey {
			return exemptions.List(ctx, opts...)
		}
		var i int
		if _, err := fmt.Sscanf(pod, "soak-%d-", &i); err != nil {
			return nil, err
		}
		ex, err := exemptions.Get(ctx, exns, fmt.Sprint("ex-", i))
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return []*unstructured.Unstructured{ex}, err
	}
	policies := m.Capability("policies", vigil.InNamespaces(apps))
	vigil.When(policies, &corev1.Pod{}).IsCreated().Named("disallow-privileged").
		Validate(func(ctx context.Context, r *vigil.Request[*corev1.Pod]) vigil.Verdict {
			began := time.Now()
			if !privilegedPod(r.Object) {
				return admission.Allow()
			}
			list, err := exemptionsOf(ctx, r.Object.Name)
			if err != nil {
				return admission.Deny("the Exemptions cannot be read: " + err.Error())
			}
			v := admission.Deny("privileged pods need an Exemption")
			if exempts(list, r.Namespace, r.Object.Name) {
				v = admission.Allow()
			}
			rec.note(string(r.Raw.UID), r.Object.Name, v.Allowed(), began)
			return v
		})

	_, certDir := servingDir(b)
	b.Setenv(modcli.EnvHandoffDir, b.TempDir())
	addr := vigiltest.FreeAddr(b)
	runAdmission(b, m, addr, "--cert-dir", certDir, "--kubeconfig", vigiltest.WriteKubeConfig(b, proxy.Config()),
		"--shutdown-delay", "0s", "--webhook-url", "https://"+addr)
	waitEnforced(b, name)

	exemptionIn := func(ns string, i int) *unstructured.Unstructured {
		ex := vigil.Kind("uds.dev", "v1alpha1", "Exemption")
		ex.SetNamespace(ns)
		ex.SetName(fmt.Sprint("ex-", i))
		ex.Object["spec"] = map[string]any{"exemptions": []any{map[string]any{
			"matcher":  map[string]any{"namespace": apps, "name": fmt.Sprintf("^soak-%d-", i)},
			"policies": []any{"DisallowPrivileged"},
		}}}
		return ex
	}
	exemption := func(i int) *unstructured.Unstructured { return exemptionIn(exns, i) }
	if read == scopedLister {
		// The pods' own namespace exempts every pod of every trial.
		own := exemptionIn(apps, 0)
		own.SetName("own")
		own.Object["spec"] = map[string]any{"exemptions": []any{map[string]any{
			"matcher":  map[string]any{"namespace": apps, "name": "^soak-"},
			"policies": []any{"DisallowPrivileged"},
		}}}
		if err := env.Client.Create(ctx, own); err != nil {
			b.Fatal(err)
		}
	}
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: name},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "c", Image: "busybox", SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
			}}},
		}
	}
	// run runs trial(i) for i < trials on the workers, until the budget ends.
	var ran atomic.Int64
	run := func(trial func(i int)) {
		var next atomic.Int64
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for {
					i := int(next.Add(1)) - 1
					if i >= trials || ctx.Err() != nil {
						return
					}
					trial(i)
					ran.Add(1)
				}
			})
		}
		wg.Wait()
	}
	var falseDenials, staleAllows, plainDenials, plainAllows, failures atomic.Int64
	var firstErr atomic.Value
	create := func(p *corev1.Pod) (allowed bool) {
		err := env.Client.Create(ctx, p)
		if err != nil && !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
			failures.Add(1)
			firstErr.CompareAndSwap(nil, err)
		}
		return err == nil
	}

	// Created, then at once a Pod it exempts.
	run(func(i int) {
		if err := env.Client.Create(ctx, exemption(i)); err != nil {
			firstErr.CompareAndSwap(nil, err)
			failures.Add(1)
			return
		}
		p := pod(fmt.Sprintf("soak-%d-created", i))
		if !create(p) {
			falseDenials.Add(1)
		}
		if allowed, seen := rec.plain(p.Name); seen && !allowed {
			plainDenials.Add(1)
		}
	})
	// Every Exemption reaches the module's cache before the deletions.
	time.Sleep(4 * watchDelay)
	// Deleted, then at once a Pod it used to exempt.
	run(func(i int) {
		if err := env.Client.Delete(ctx, exemption(i)); err != nil {
			firstErr.CompareAndSwap(nil, err)
			failures.Add(1)
			return
		}
		p := pod(fmt.Sprintf("soak-%d-deleted", i))
		if create(p) {
			staleAllows.Add(1)
		}
		if allowed, seen := rec.plain(p.Name); seen && allowed {
			plainAllows.Add(1)
		}
	})

	if err, _ := firstErr.Load().(error); err != nil {
		b.Errorf("%d requests failed; the first: %v", failures.Load(), err)
	}
	if ran.Load() != int64(2*trials) {
		b.Errorf("ran %d trials of %d within %s", ran.Load(), 2*trials, budget)
	}
	if falseDenials.Load() > 0 || staleAllows.Load() > 0 {
		b.Errorf("false_denials=%d stale_allows=%d: want none", falseDenials.Load(), staleAllows.Load())
	}
	if plainDenials.Load()+plainAllows.Load() == 0 {
		b.Errorf("the plain cache reads were never stale: the watch delay did not make the cache lag, so the run proves nothing")
	}
	return freshResult{
		trials: ran.Load(), falseDenials: falseDenials.Load(), staleAllows: staleAllows.Load(),
		plainDenials: plainDenials.Load(), plainAllows: plainAllows.Load(), recheckP99: rec.p99(),
	}
}

// waitEnforced waits until the module's registration enforces its webhooks.
func waitEnforced(t testing.TB, name string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := env.Client.Get(t.Context(), client.ObjectKey{Name: name}, cfg); err == nil {
			var rec registration.Record
			_ = json.Unmarshal([]byte(cfg.Annotations[registration.Annotation]), &rec)
			if rec.State == "enforced" {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the module did not enforce its webhooks within 60s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func privilegedPod(p *corev1.Pod) bool {
	for _, c := range p.Spec.Containers {
		if c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged {
			return true
		}
	}
	return false
}

// exempts reports whether an Exemption's entry names the pod's namespace, a
// pattern its name matches, and the DisallowPrivileged policy.
func exempts(list []*unstructured.Unstructured, namespace, pod string) bool {
	for _, ex := range list {
		entries, _, _ := unstructured.NestedSlice(ex.Object, "spec", "exemptions")
		for _, e := range entries {
			entry, _ := e.(map[string]any)
			ns, _, _ := unstructured.NestedString(entry, "matcher", "namespace")
			expr, _, _ := unstructured.NestedString(entry, "matcher", "name")
			pols, _, _ := unstructured.NestedStringSlice(entry, "policies")
			if ns != namespace || !slices.Contains(pols, "DisallowPrivileged") {
				continue
			}
			if re, err := regexp.Compile(expr); err == nil && re.MatchString(pod) {
				return true
			}
		}
	}
	return false
}
