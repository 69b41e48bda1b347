package soak_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/internal/commands/modcli"
	"github.com/vigilkit/vigil/internal/serving/registration"
	"github.com/vigilkit/vigil/vigiltest"
)

// outageResult is what one outage of every admission replica did to a
// stream of creates.
type outageResult struct {
	creates, rejected  int // during the outage, until enforced again
	rejectedAfterGrace int // rejected after the bound and the watcher's checks ran out
	unchecked          int // passed unmutated during the outage
	rejectedHome       int // rejected in the module's own namespace, at any time
	recovered          time.Duration
}

// soakOutage runs a module whose capability mutates ConfigMaps in one
// namespace — with FailOpenAfter(bound) when optIn, and then its watcher
// role too — while a client creates ConfigMaps there and in the module's own
// namespace without pause; takes every admission replica away for outage
// (the replica stops and its Service address refuses connections); then
// brings a new one and measures how long until creates are mutated again.
func soakOutage(tb testing.TB, optIn bool, outage, bound time.Duration) outageResult {
	const interval = 500 * time.Millisecond
	ctx := tb.Context()
	home, apps := env.Namespace(tb), env.Namespace(tb)
	name := "outage-" + home[len(home)-6:]
	bootstrapConfigs(tb, name)
	newModule := func() *vigil.Module {
		m := vigil.NewModule(name, vigil.Options{Namespace: home, Version: "1.0.0"})
		opts := []vigil.CapabilityOption{vigil.InNamespaces(apps)}
		if optIn {
			opts = append(opts, vigil.FailOpenAfter(bound))
		}
		c := m.Capability("soak", opts...)
		vigil.When(c, &corev1.ConfigMap{}).IsCreated().Mutate(func(_ context.Context, r *vigil.Request[*corev1.ConfigMap]) error {
			r.SetLabel("soaked", "yes")
			return nil
		})
		return m
	}
	_, certDir := servingDir(tb)
	if os.Getenv(modcli.EnvHandoffDir) == "" {
		tb.Setenv(modcli.EnvHandoffDir, tb.TempDir())
	}
	kc := env.KubeConfigFile(tb)
	f := newFront(tb)
	replica := func(addr string) (stop func()) {
		return runAdmission(tb, newModule(), addr, "--cert-dir", certDir, "--kubeconfig", kc,
			"--shutdown-delay", "1ms", "--webhook-url", "https://"+f.ln.Addr().String())
	}
	state := func() string {
		cfg := &admissionregistrationv1.MutatingWebhookConfiguration{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, cfg); err != nil {
			return err.Error()
		}
		var rec registration.Record
		_ = json.Unmarshal([]byte(cfg.Annotations[registration.Annotation]), &rec)
		return rec.State
	}
	if optIn {
		wctx, cancel := context.WithCancel(context.Background())
		done := make(chan int, 1)
		go func() {
			done <- vigil.Execute(wctx, newModule(), []string{"watcher", "--kubeconfig", kc, "--metrics-addr=", "--probe-addr=",
				"--lease-duration", "3s", "--renew-deadline", "2s", "--retry-period", "500ms", "--outage-check-interval", interval.String()})
		}()
		tb.Cleanup(func() {
			cancel()
			if code := <-done; code != 0 {
				tb.Errorf("watcher exited %d", code)
			}
		})
	}

	type result struct {
		began, ended time.Time
		ns           string
		err          error
		mutated      bool
	}
	var mu sync.Mutex
	var results []result
	var stops []func()
	for _, ns := range []string{apps, home} {
		stops = append(stops, createLoop(ctx, ns, "o", nil, func(c *corev1.ConfigMap, err error, began, ended time.Time) {
			mu.Lock()
			results = append(results, result{began: began, ended: ended, ns: ns, err: err, mutated: c.Labels["soaked"] == "yes"})
			mu.Unlock()
		}))
	}
	enforcedSince := func(t time.Time) (time.Time, bool) {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range results {
			if r.ns == apps && r.began.After(t) && r.err == nil && r.mutated {
				return r.ended, true
			}
		}
		return time.Time{}, false
	}
	waitEnforced := func(since time.Time) time.Time {
		deadline := time.Now().Add(60 * time.Second)
		for {
			if at, ok := enforcedSince(since); ok {
				return at
			}
			if time.Now().After(deadline) {
				tb.Fatalf("not enforced within 60s (state %q)", state())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	addrA := vigiltest.FreeAddr(tb)
	f.target.Store(addrA)
	stopA := replica(addrA)
	firstEnforced := waitEnforced(time.Now())
	time.Sleep(2 * time.Second)

	// Every replica goes at once: the Service address refuses, and the
	// replica stops without a drain (its connections close).
	outageAt := time.Now()
	f.target.Store("127.0.0.1:1")
	stopA()
	time.Sleep(time.Until(outageAt.Add(outage)))
	if optIn && state() != registration.StateFailedOpen {
		tb.Errorf("after an outage of %s with a bound of %s: state %q, want %s", outage, bound, state(), registration.StateFailedOpen)
	}
	if !optIn && state() != registration.StateEnforced {
		tb.Errorf("after an outage without a bound: state %q, want %s", state(), registration.StateEnforced)
	}
	returnAt := time.Now()
	addrB := vigiltest.FreeAddr(tb)
	f.target.Store(addrB)
	replica(addrB)
	enforcedAt := waitEnforced(returnAt)
	time.Sleep(time.Second)
	for _, stop := range stops {
		stop()
	}

	res := outageResult{recovered: enforcedAt.Sub(returnAt)}
	grace := outageAt.Add(bound + 2*interval)
	for _, r := range results {
		if r.ns == home {
			if r.err != nil {
				res.rejectedHome++
				tb.Errorf("a create in the module's own namespace was rejected: %v", r.err)
			}
			continue
		}
		switch {
		case r.began.Before(firstEnforced):
			// registered when ready: not enforced yet
		case r.ended.Before(outageAt):
			if r.err != nil || !r.mutated {
				tb.Errorf("before the outage: err %v, mutated %v", r.err, r.mutated)
			}
		case r.began.Before(enforcedAt):
			res.creates++
			if r.err != nil {
				res.rejected++
				if optIn && r.began.After(grace) {
					res.rejectedAfterGrace++
				}
			} else if !r.mutated {
				res.unchecked++
			}
		}
	}
	return res
}

// checkOutage holds an outage's result to what the capability declared.
func checkOutage(tb testing.TB, optIn bool, r outageResult) {
	tb.Helper()
	switch {
	case r.rejectedHome > 0:
		tb.Errorf("%d creates in the module's own namespace rejected during the outage", r.rejectedHome)
	case r.rejected == 0:
		tb.Errorf("no create rejected during the outage (%+v): the grace, or failing closed, did not hold", r)
	case optIn && r.rejectedAfterGrace > 0:
		tb.Errorf("%d creates rejected after the grace with FailOpenAfter (%+v)", r.rejectedAfterGrace, r)
	case optIn && r.unchecked == 0:
		tb.Errorf("nothing passed unchecked after the grace with FailOpenAfter (%+v)", r)
	case !optIn && r.unchecked > 0:
		tb.Errorf("%d creates passed unchecked without FailOpenAfter (%+v)", r.unchecked, r)
	}
}

// An outage of every admission replica, shorter than the soak's: without
// FailOpenAfter every create the capability matches fails until a replica
// serves again, while the module's own namespace stays admitted; with it,
// none fails after the bound (and the watcher's checks); both enforce again
// once a replica returns.
func TestSoakOutage(t *testing.T) {
	for _, optIn := range []bool{false, true} {
		t.Run(fmt.Sprint("fail-open=", optIn), func(t *testing.T) {
			r := soakOutage(t, optIn, 6*time.Second, 2*time.Second)
			t.Logf("%+v", r)
			checkOutage(t, optIn, r)
		})
	}
}
