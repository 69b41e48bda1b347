package soak_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/commands/modcli"
	"github.com/vigilkit/vigil/internal/serving/registration"
	"github.com/vigilkit/vigil/vigiltest"
)

// front is a stable loopback address in front of whichever replica is
// current, as a Service is in front of a Deployment's pods.
type front struct {
	ln     net.Listener
	target atomic.Value // string
}

func newFront(t testing.TB) *front {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &front{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				target, _ := f.target.Load().(string)
				s, err := net.Dial("tcp", target)
				if err != nil {
					c.Close()
					return
				}
				go func() { _, _ = io.Copy(s, c); s.Close() }()
				_, _ = io.Copy(c, s)
				c.Close()
			}()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return f
}

// BenchmarkSoakRegistration (make soak-registration): a client creates
// ConfigMaps without pause while a module starts with a gate pending for 10 s,
// registers, and is then replaced by a second replica. No request may be
// rejected, and every object created after the first registration must carry
// the module's mutation. Then every admission replica goes for 60 s
// (VIGIL_SOAK_OUTAGE), creates still flowing, once without and once with
// FailOpenAfter (see soakOutage). Then the module is upgraded from version 1
// to version 2 twice, its objects applied by the Helm SDK and by kubectl
// apply (see soakUpgrade). Run with -benchtime 1x.
func BenchmarkSoakRegistration(b *testing.B) {
	ctx := b.Context()
	home, apps := env.Namespace(b), env.Namespace(b)
	name := "soak-" + home[len(home)-6:]
	bootstrapConfigs(b, name)
	newModule := func() *vigil.Module {
		m := vigil.NewModule(name, vigil.Options{Namespace: home, Version: "1.0.0"})
		vigil.WaitFor(m, &corev1.ConfigMap{}).WithName("go").InNamespace(home).Named("go").ToBeCreated(nil)
		c := m.Capability("soak", vigil.InNamespaces(apps))
		vigil.When(c, &corev1.ConfigMap{}).IsCreated().Mutate(func(_ context.Context, r *vigil.Request[*corev1.ConfigMap]) error {
			r.SetLabel("soaked", "yes")
			return nil
		})
		return m
	}
	_, certDir := servingDir(b)
	handoff := b.TempDir()
	b.Setenv(modcli.EnvHandoffDir, handoff)
	kc := env.KubeConfigFile(b)
	f := newFront(b)

	replica := func(addr string) (stop func()) {
		return runAdmission(b, newModule(), addr, "--cert-dir", certDir, "--kubeconfig", kc,
			"--shutdown-delay", "1s", "--webhook-url", "https://"+f.ln.Addr().String())
	}

	// The client: create, count, check the label.
	var creates, rejected, unmutated atomic.Int64
	var registeredAt atomic.Int64 // unix nanos of the first enforcement
	var firstErr atomic.Value
	stopClient := createLoop(ctx, apps, "soak", nil, func(c *corev1.ConfigMap, err error, began, _ time.Time) {
		if err != nil {
			rejected.Add(1)
			firstErr.CompareAndSwap(nil, err)
			return
		}
		creates.Add(1)
		if reg := registeredAt.Load(); reg != 0 && began.UnixNano() > reg && c.Labels["soaked"] != "yes" {
			unmutated.Add(1)
		}
	})
	// Watch for enforcement.
	started := time.Now()
	go func() {
		for registeredAt.Load() == 0 {
			cfg := &admissionregistrationv1.MutatingWebhookConfiguration{}
			if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, cfg); err == nil {
				var rec registration.Record
				_ = json.Unmarshal([]byte(cfg.Annotations[registration.Annotation]), &rec)
				if rec.State == "enforced" {
					registeredAt.Store(time.Now().UnixNano())
					return
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()

	addrA := vigiltest.FreeAddr(b)
	f.target.Store(addrA)
	stopA := replica(addrA)
	// The gate is pending for 10 s; then its init container runs.
	time.Sleep(10 * time.Second)
	if err := env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: home, Name: "go"}}); err != nil {
		b.Fatal(err)
	}
	if code := vigil.Execute(ctx, newModule(), []string{"gate", "--phase", "0", "--kubeconfig", kc}); code != 0 {
		b.Fatalf("gate exit %d", code)
	}
	deadline := time.Now().Add(30 * time.Second)
	for registeredAt.Load() == 0 {
		if time.Now().After(deadline) {
			b.Fatal("the module never registered")
		}
		time.Sleep(50 * time.Millisecond)
	}
	registeredAfter := time.Duration(registeredAt.Load() - started.UnixNano())
	// The sleeps below pace the scenario: creates flow through each phase
	// for 3s.
	time.Sleep(3 * time.Second)

	// A rolling update: the second replica comes up, the front moves to it,
	// the first stops.
	addrB := vigiltest.FreeAddr(b)
	stopB := replica(addrB)
	defer stopB()
	time.Sleep(3 * time.Second)
	f.target.Store(addrB)
	stopA()
	time.Sleep(3 * time.Second)
	stopClient()

	if err, _ := firstErr.Load().(error); err != nil {
		b.Errorf("first rejection: %v", err)
	}
	if rejected.Load() > 0 || unmutated.Load() > 0 || creates.Load() < 200 {
		b.Errorf("creates=%d rejected=%d unmutated=%d: want at least 200 creates, none rejected or unmutated", creates.Load(), rejected.Load(), unmutated.Load())
	}

	// Then every admission replica goes for a while (60 s unless
	// VIGIL_SOAK_OUTAGE says otherwise), with creates flowing: once without
	// FailOpenAfter, once with a bound of a sixth of the outage.
	outage := 60 * time.Second
	if v := os.Getenv("VIGIL_SOAK_OUTAGE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatalf("VIGIL_SOAK_OUTAGE: %v", err)
		}
		outage = d
	}
	bound := outage / 6
	closed := soakOutage(b, false, outage, bound)
	checkOutage(b, false, closed)
	open := soakOutage(b, true, outage, bound)
	checkOutage(b, true, open)

	// Then an upgrade from version 1 to version 2, its objects applied by
	// the Helm SDK (server-side apply), then by kubectl (client-side
	// three-way merge).
	upHelm := soakUpgrade(b, "helm", false)
	upKubectl := soakUpgrade(b, "kubectl", false)
	// Then the kubectl upgrade again (a Helm install after kubectl's
	// client-side apply of the Store CRD would conflict on it), with a
	// connection flood from one source on the replicas' webhook ports
	// throughout (see soakUpgrade).
	upFlood := soakUpgrade(b, "kubectl", true)

	fmt.Printf("registration: creates=%d rejected=%d unmutated_after_registration=%d registered_after=%dms"+
		" outage_s=%.0f closed_outage_rejected=%d/%d closed_outage_rejected_home=%d closed_outage_recovered_s=%.2f"+
		" fail_open_after_s=%.0f outage_rejected_in_grace=%d outage_rejected_after_grace=%d outage_unchecked=%d outage_rejected_home=%d outage_recovered_s=%.2f"+
		" upgrade_creates=%d upgrade_rejected=%d upgrade_unmutated=%d"+
		" upgrade_flood_creates=%d upgrade_flood_rejected=%d upgrade_flood_unmutated=%d upgrade_flood_admitted_violations=%d upgrade_flood_violation_tries=%d upgrade_flood_conns_dialed=%d upgrade_flood_ignore_window_ms=%d\n",
		creates.Load(), rejected.Load(), unmutated.Load(), registeredAfter.Milliseconds(),
		outage.Seconds(), closed.rejected, closed.creates, closed.rejectedHome, closed.recovered.Seconds(),
		bound.Seconds(), open.rejected-open.rejectedAfterGrace, open.rejectedAfterGrace, open.unchecked, open.rejectedHome, open.recovered.Seconds(),
		upHelm.creates+upKubectl.creates, upHelm.rejected+upKubectl.rejected, upHelm.unmutated+upKubectl.unmutated,
		upFlood.creates, upFlood.rejected, upFlood.unmutated, upFlood.violations, upFlood.violationTries, upFlood.floodDialed, upFlood.ignoreWindow.Milliseconds())

}

// A rollout: the new version registers while the old one still serves
// behind the same front. The old replica allows what it has no binding for,
// because a newer version is registered, and counts it; it never overwrites
// the newer configuration, even when it restarts.
func TestRolloutOldAndNewSideBySide(t *testing.T) {
	ctx := t.Context()
	home, apps := env.Namespace(t), env.Namespace(t)
	name := "roll-" + home[len(home)-6:]
	bootstrapConfigs(t, name)
	module := func(version string, withPodPolicy bool) *vigil.Module {
		m := vigil.NewModule(name, vigil.Options{Namespace: home, Version: version})
		c := m.Capability("policies", vigil.InNamespaces(apps))
		vigil.When(c, &corev1.ConfigMap{}).IsCreated().Named("label").Mutate(func(_ context.Context, r *vigil.Request[*corev1.ConfigMap]) error {
			r.SetLabel("version", version)
			return nil
		})
		if withPodPolicy {
			vigil.When(c, &corev1.Pod{}).IsCreated().Named("no-bad-pods").Validate(func(_ context.Context, r *vigil.Request[*corev1.Pod]) vigil.Verdict {
				if r.HasLabel("bad") {
					return admission.Deny("bad pods are not allowed")
				}
				return admission.Allow()
			})
		}
		return m
	}
	ca, certDir := servingDir(t)
	t.Setenv(modcli.EnvHandoffDir, t.TempDir())
	kc := env.KubeConfigFile(t)
	f := newFront(t)
	run := func(m *vigil.Module, addr string) func() {
		return runAdmission(t, m, addr, "--cert-dir", certDir, "--kubeconfig", kc,
			"--shutdown-delay", "0s", "--webhook-url", "https://"+f.ln.Addr().String())
	}
	record := func() registration.Record {
		cfg := &admissionregistrationv1.MutatingWebhookConfiguration{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, cfg); err != nil {
			t.Fatal(err)
		}
		var rec registration.Record
		_ = json.Unmarshal([]byte(cfg.Annotations[registration.Annotation]), &rec)
		return rec
	}
	waitFor := func(what string, ok func() bool) {
		deadline := time.Now().Add(30 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	newPod := func(n string, labels map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: n, Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}
	}

	oldAddr := vigiltest.FreeAddr(t)
	f.target.Store(oldAddr)
	stopOld := run(module("1.0.0", false), oldAddr)
	defer func() { stopOld() }()
	waitFor("the old version to enforce", func() bool { r := record(); return r.State == "enforced" && r.Version == "1.0.0" })

	// The new version registers while the front still sends everything to the
	// old replica; the old one answers its canary.
	newAddr := vigiltest.FreeAddr(t)
	stopNew := run(module("1.1.0", true), newAddr)
	defer stopNew()
	waitFor("the new version to enforce", func() bool { r := record(); return r.State == "enforced" && r.Version == "1.1.0" })
	vcfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, vcfg); err != nil {
		t.Fatal(err)
	}
	if len(vcfg.Webhooks) != 1 { // the Pod policy (the canary is mutating)
		t.Fatalf("validating webhooks %d, want the new version's Pod policy", len(vcfg.Webhooks))
	}
	// The old replica does not know the Pod policy: it allows, while the
	// newer version is registered, and counts what it allowed so.
	for i := range 3 {
		if err := env.Client.Create(ctx, newPod(fmt.Sprint("bad-old-", i), map[string]string{"bad": ""})); err != nil {
			t.Fatalf("the old replica rejected a request for a binding it does not know: %v", err)
		}
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}}}
	_, metrics := httpGet(hc, metricsURL(oldAddr))
	if !strings.Contains(metrics, `vigil_admission_unattributed_total{answer="newer_version",module="`+name+`",reason="kind"}`) ||
		strings.Contains(metrics, `answer="failure_policy"`) {
		t.Fatalf("the old replica's metrics do not count the Pod validations it allowed for the newer version:\n%s", metrics)
	}
	// The old version restarts: it must not overwrite the newer configuration.
	stopOld()
	before := record()
	stopOld = run(module("1.0.0", false), oldAddr)
	vigiltest.Consistently(t, 2*time.Second, func() error {
		if after := record(); !reflect.DeepEqual(after, before) {
			return fmt.Errorf("record %+v → %+v: the old version overwrote the newer", before, after)
		}
		return nil
	})
	// The front moves to the new replica: the new policy applies.
	f.target.Store(newAddr)
	waitFor("the new replica to serve", func() bool {
		err := env.Client.Create(ctx, newPod(fmt.Sprint("bad-new-", time.Now().UnixNano()), map[string]string{"bad": ""}))
		return err != nil && strings.Contains(err.Error(), "bad pods are not allowed")
	})
}

// createLoop creates ConfigMaps prefix-0, prefix-1, … in ns, labelled labels, about 20 ms
// apart, and hands each create's object (as stored, when it was admitted),
// error and timing to seen, until the returned stop is called; stop waits
// for the loop to end. The soaks count different things from the same load.
func createLoop(ctx context.Context, ns, prefix string, labels map[string]string, seen func(c *corev1.ConfigMap, err error, began, ended time.Time)) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			c := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprint(prefix, "-", i), Labels: labels}}
			began := time.Now()
			err := env.Client.Create(ctx, c)
			seen(c, err, began, time.Now())
			time.Sleep(20 * time.Millisecond) // paces the load
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}
