package registration_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/definition/define"
	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/serving/registration"
	"github.com/vigilkit/vigil/vigiltest"
)

// outageModule registers a module behind a front that can take every replica
// away: capability "open" validates ConfigMaps in apps with an outage bound,
// "closed" validates Pods cluster-wide without one. The stand-in denies
// everything but the canary.
func outageModule(t *testing.T, prefix string, bound time.Duration) (r *registration.Registrar, opts registration.Options, front *webhookFront, name, home, apps string) {
	t.Helper()
	home, apps = env.Namespace(t), env.Namespace(t)
	name = prefix + "-" + home[len(home)-6:]
	bootstrap(t, name)
	m := newModule(t, name)
	front = newFront(t, strings.TrimPrefix(strings.TrimSuffix(m.srv.URL(""), "/"), "https://"))
	opts = options(t, name, home, apps, m, "https://"+front.Addr())
	cms := define.ValidateBinding(corev1.SchemeGroupVersion.WithKind("ConfigMap"), &corev1.ConfigMap{},
		func(context.Context, *admission.Request[*corev1.ConfigMap]) admission.Verdict {
			return admission.Deny("no")
		})
	cms.Capability, cms.Name, cms.Operations, cms.Namespaces, cms.FailOpenAfter = "open", "cms", []admissionv1.Operation{admissionv1.Create}, []string{apps}, bound
	pods := define.ValidateBinding(corev1.SchemeGroupVersion.WithKind("Pod"), &corev1.Pod{},
		func(context.Context, *admission.Request[*corev1.Pod]) admission.Verdict { return admission.Deny("no") })
	pods.Capability, pods.Name, pods.Operations = "closed", "pods", []admissionv1.Operation{admissionv1.Create}
	opts.Bindings = []spec.Binding{cms, pods}
	r = registration.New(env.Clientset, opts)
	if err := r.Register(t.Context()); err != nil {
		t.Fatal(err)
	}
	return r, opts, front, name, home, apps
}

// validating reads the module's validating configuration: its record and
// each webhook's failure policy by name.
func validating(t *testing.T, name string) (registration.Record, map[string]admissionregistrationv1.FailurePolicyType) {
	t.Helper()
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Name: name}, cfg); err != nil {
		t.Fatal(err)
	}
	var rec registration.Record
	if raw := cfg.Annotations[registration.Annotation]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &rec); err != nil {
			t.Fatal(err)
		}
	}
	out := map[string]admissionregistrationv1.FailurePolicyType{}
	for _, w := range cfg.Webhooks {
		out[w.Name] = ptr.Deref(w.FailurePolicy, admissionregistrationv1.Fail)
	}
	return rec, out
}

var seq int

func configMap(ns string) *corev1.ConfigMap {
	seq++
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("cm-%d", seq)}}
}

func podIn(ns string) *corev1.Pod {
	seq++
	return pod(ns, fmt.Sprintf("p-%d", seq))
}

// With an outage bound, creates the capability matches fail while no
// replica serves until the bound runs out, then pass; a capability without
// one keeps failing; the module's own namespace and kube-system stay
// admitted throughout; once a replica serves again, the registrar's Sync
// enforces the webhooks that failed open, without weakening the others.
func TestFailOpenAfterTheBoundOnly(t *testing.T) {
	ctx := t.Context()
	const bound, outage, interval = 2 * time.Second, 9 * time.Second, 200 * time.Millisecond
	r, opts, front, name, home, apps := outageModule(t, "outage", bound)
	if err := env.Client.Create(ctx, configMap(apps)); err == nil || !strings.Contains(err.Error(), "denied by "+name) {
		t.Fatalf("a ConfigMap create in %s while enforced: %v; want denied by the module", apps, err)
	}

	// The watcher's copy needs no client configuration, CA or mapper.
	wopts := opts
	wopts.ClientConfig, wopts.CABundle, wopts.Mapper = nil, nil, nil
	var obsMu sync.Mutex
	var failOpens []string // each webhook the watcher failed open, as the metric counts them
	var failedNow int      // as the gauge shows
	wopts.OutageObserved = func(failedOpen, changed []string) {
		obsMu.Lock()
		defer obsMu.Unlock()
		failOpens, failedNow = append(failOpens, changed...), len(failedOpen)
	}
	observed := func() ([]string, int) {
		obsMu.Lock()
		defer obsMu.Unlock()
		return slices.Clone(failOpens), failedNow
	}
	watch := registration.New(env.Clientset, wopts)
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- watch.WatchOutages(wctx, interval) }()
	t.Cleanup(func() { stop(); <-done })

	openHook := spec.WebhookName(name, "open", spec.Validate)
	closedHook := spec.WebhookName(name, "closed", spec.Validate)
	vigiltest.Consistently(t, time.Second, func() error {
		if rec, fp := validating(t, name); rec.State != registration.StateEnforced || fp[openHook] != admissionregistrationv1.Fail {
			return fmt.Errorf("while a replica serves: record %+v, policies %v; want enforced, %s Fail", rec, fp, openHook)
		}
		return nil
	})

	admitted := func(phase string) {
		t.Helper()
		for _, ns := range []string{home, metav1.NamespaceSystem} {
			p := podIn(ns)
			if err := env.Client.Create(ctx, p); err != nil {
				t.Fatalf("%s: a Pod create in %s (never sent to the webhooks) failed: %v", phase, ns, err)
			}
			_ = env.Client.Delete(context.Background(), p)
		}
		if err := env.Client.Create(ctx, podIn(apps)); err == nil {
			t.Fatalf("%s: a Pod create in %s passed, though its capability has no outage bound", phase, apps)
		}
	}

	began := time.Now()
	front.Outage(outage)
	var failedInGrace, passedInGrace int
	for time.Since(began) < bound {
		if err := env.Client.Create(ctx, configMap(apps)); err != nil {
			failedInGrace++
		} else {
			passedInGrace++
		}
		time.Sleep(100 * time.Millisecond)
	}
	if passedInGrace > 0 || failedInGrace == 0 {
		t.Fatalf("within the %s bound: %d ConfigMap creates passed, %d failed; want none passed", bound, passedInGrace, failedInGrace)
	}
	admitted("during the grace")

	var openedAfter time.Duration
	vigiltest.Eventually(t, 3*time.Second, func() error {
		if err := env.Client.Create(ctx, configMap(apps)); err != nil {
			return err
		}
		openedAfter = time.Since(began)
		return nil
	})
	t.Logf("failed open %s into the outage (bound %s, check every %s)", openedAfter.Round(time.Millisecond), bound, interval)
	rec, fp := validating(t, name)
	if rec.State != registration.StateFailedOpen || fp[openHook] != admissionregistrationv1.Ignore || fp[closedHook] != admissionregistrationv1.Fail {
		t.Fatalf("failed open: record %+v, policies %v; want failed-open, %s Ignore, %s Fail", rec, fp, openHook, closedHook)
	}
	// The record says since when, and which webhooks: the audit's window.
	since, err := time.Parse(time.RFC3339, rec.FailedOpenSince)
	if err != nil || !slices.Equal(rec.FailedOpen, []string{openHook}) || since.Before(began.Truncate(time.Second)) || since.After(time.Now()) {
		t.Fatalf("failed open: record %+v; want failedOpen [%s] since a time within the outage (began %s)", rec, openHook, began.UTC().Format(time.RFC3339))
	}
	if w := rec.Windows(); len(w) != 1 || w[0].To != "" || !w[0].Covers(openHook, time.Now()) || w[0].Covers(closedHook, time.Now()) {
		t.Fatalf("failed open: windows %+v; want one open window covering now for %s only", w, openHook)
	}
	vigiltest.Eventually(t, 2*time.Second, func() error {
		if fo, now := observed(); !slices.Equal(fo, []string{openHook}) || now != 1 {
			return fmt.Errorf("observed fail-opens %v, %d failed open now; want [%s], 1", fo, now, openHook)
		}
		return nil
	})
	admitted("after the bound")

	// A replica's registrar running meanwhile probes and waits, leaving the
	// capability without a bound enforced.
	synced := make(chan error, 1)
	go func() {
		drift, err := r.Sync(ctx)
		if err == nil && len(drift) > 0 {
			err = fmt.Errorf("a failed-open configuration reported as drift: %q", drift)
		}
		synced <- err
	}()
	for time.Since(began) < outage-time.Second {
		if err := env.Client.Create(ctx, configMap(apps)); err != nil {
			t.Fatalf("%s into the outage, after the bound: a ConfigMap create failed: %v", time.Since(began).Round(time.Millisecond), err)
		}
		if _, fp := validating(t, name); fp[closedHook] != admissionregistrationv1.Fail {
			t.Fatalf("while the registrar probed: %s is %s; want Fail", closedHook, fp[closedHook])
		}
		time.Sleep(200 * time.Millisecond)
	}
	admitted("late in the outage")

	if err := <-synced; err != nil {
		t.Fatal(err)
	}
	recovered := time.Since(began) - outage
	if recovered < 0 {
		t.Fatalf("Sync enforced %s before the replicas came back", -recovered)
	}
	t.Logf("enforced again %s after the replicas came back", recovered.Round(time.Millisecond))
	rec, fp = validating(t, name)
	if rec.State != registration.StateEnforced || fp[openHook] != admissionregistrationv1.Fail || fp[closedHook] != admissionregistrationv1.Fail {
		t.Fatalf("after the replicas came back: record %+v, policies %v; want enforced, both Fail", rec, fp)
	}
	// The window closed, and stays on record for the audit.
	if len(rec.Outages) != 1 || rec.Outages[0].From != since.UTC().Format(time.RFC3339) || rec.Outages[0].To == "" ||
		!slices.Equal(rec.Outages[0].Webhooks, []string{openHook}) || rec.FailedOpenSince != "" || len(rec.FailedOpen) != 0 {
		t.Fatalf("after the replicas came back: record %+v; want one closed outage window of %s from %s", rec, openHook, since.UTC().Format(time.RFC3339))
	}
	if to, _ := time.Parse(time.RFC3339, rec.Outages[0].To); to.Before(since) || to.After(time.Now()) {
		t.Fatalf("outage window %+v ends outside the outage", rec.Outages[0])
	}
	vigiltest.Eventually(t, 2*time.Second, func() error {
		if fo, now := observed(); len(fo) != 1 || now != 0 {
			return fmt.Errorf("observed fail-opens %v, %d failed open now; want one fail-open in all, none now", fo, now)
		}
		return nil
	})
	if err := env.Client.Create(ctx, configMap(apps)); err == nil || !strings.Contains(err.Error(), "denied by "+name) {
		t.Fatalf("a ConfigMap create once a replica serves again: %v; want denied by the module", err)
	}
}

// Without an outage bound an outage fails closed, but never locks the module
// out of its own recovery: its own namespace and the system namespaces stay
// admitted, and the watcher changes nothing.
func TestOutageWithoutBoundKeepsOwnNamespaceAdmitted(t *testing.T) {
	ctx := t.Context()
	_, opts, front, name, home, apps := outageModule(t, "closed", 0)
	watch := registration.New(env.Clientset, opts)
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- watch.WatchOutages(wctx, 100*time.Millisecond) }()
	t.Cleanup(func() { stop(); <-done })

	front.Outage(4 * time.Second)
	began := time.Now()
	for time.Since(began) < 3*time.Second {
		for _, ns := range []string{home, metav1.NamespaceSystem} {
			p := podIn(ns)
			if err := env.Client.Create(ctx, p); err != nil {
				t.Fatalf("during the outage: a Pod create in %s failed: %v", ns, err)
			}
			_ = env.Client.Delete(context.Background(), p)
		}
		if err := env.Client.Create(ctx, configMap(home)); err != nil {
			t.Fatalf("during the outage: a ConfigMap create in the module's namespace failed: %v", err)
		}
		for _, o := range []client.Object{podIn(apps), configMap(apps)} {
			if err := env.Client.Create(ctx, o); err == nil {
				t.Fatalf("during the outage: a %T create in %s passed without an outage bound", o, apps)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	if rec, fp := validating(t, name); rec.State != registration.StateEnforced {
		t.Fatalf("without an outage bound: record %+v, policies %v; want enforced", rec, fp)
	}
}
