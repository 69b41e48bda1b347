package admission

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/commands/modcli"
	"github.com/vigilkit/vigil/internal/serving/admit"
	"github.com/vigilkit/vigil/internal/serving/certs"
	"github.com/vigilkit/vigil/internal/testsupport/testkit"
	"github.com/vigilkit/vigil/vigiltest"
)

// writeServing issues a serving certificate into dir laid out as a Secret
// volume (testkit.WriteServing).
func writeServing(t testing.TB, ca *certs.CA, dir string) { testkit.WriteServing(t, ca, dir) }

// warnings collects the warnings the API server passes on.
type warnings struct {
	mu  sync.Mutex
	all []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	w.all = append(w.all, text)
	w.mu.Unlock()
}

func (w *warnings) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.all, "; ")
}

// A module's bindings, served over TLS on loopback and called by the real API
// server: mutations, denials, warnings, filters, namespace scope, old objects,
// custom resources, dry-run, and bindings that panic or hang.
func TestAdmissionThroughTheAPIServer(t *testing.T) {
	ctx := t.Context()
	apps := env.Namespace(t)
	other := env.Namespace(t)
	home := env.Namespace(t)
	crd, err := os.ReadFile("../../examples/phases/widgets-crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := env.InstallCRDYAML(crd); err != nil {
		t.Fatal(err)
	}

	m := vigil.NewModule("guard", vigil.Options{Namespace: home, WebhookTimeout: 4 * time.Second})
	policies := m.Capability("policies", vigil.InNamespaces(apps))
	vigil.When(policies, &corev1.Pod{}).IsCreatedOrUpdated().Named("label-pods").
		Mutate(func(_ context.Context, r *vigil.Request[*corev1.Pod]) error {
			r.SetLabel("vigil.dev/admitted", "true")
			return nil
		})
	vigil.When(policies, &corev1.Pod{}).IsCreated().Named("no-privileged").
		Validate(func(_ context.Context, r *vigil.Request[*corev1.Pod]) vigil.Verdict {
			for _, c := range r.Object.Spec.Containers {
				if c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged {
					return admission.Deny(fmt.Sprintf("container %s is privileged: privileged pods are not allowed in %s", c.Name, r.Namespace))
				}
				if !strings.Contains(c.Image, "@sha256:") {
					return admission.Warn(fmt.Sprintf("container %s: image %s is not pinned by digest", c.Name, c.Image))
				}
			}
			return admission.Allow()
		})
	vigil.When(policies, &corev1.Pod{}).IsUpdated().Named("app-immutable").
		Validate(func(_ context.Context, r *vigil.Request[*corev1.Pod]) vigil.Verdict {
			if r.OldObject.Labels["app"] != r.Object.Labels["app"] {
				return admission.Deny(fmt.Sprintf("label app is immutable (was %q)", r.OldObject.Labels["app"]))
			}
			return admission.Allow()
		})
	vigil.When(policies, vigil.Kind("example.vigil.dev", "v1", "Widget")).IsCreated().Named("default-size").
		Mutate(func(_ context.Context, r *vigil.Request[*unstructured.Unstructured]) error {
			if _, found, _ := unstructured.NestedInt64(r.Object.Object, "spec", "size"); !found {
				return unstructured.SetNestedField(r.Object.Object, int64(1), "spec", "size")
			}
			return nil
		})
	vigil.When(policies, &corev1.ConfigMap{}).IsCreated().WithLabel("record").Named("record").
		Validate(func(ctx context.Context, r *vigil.Request[*corev1.ConfigMap]) vigil.Verdict {
			if err := r.Store.Set(ctx, "last", r.Name); err != nil {
				if errors.Is(err, admit.ErrDryRun) {
					return admission.Warn("not recorded: " + err.Error())
				}
				return admission.Deny(err.Error())
			}
			return admission.Allow()
		})
	vigil.When(policies, &corev1.ConfigMap{}).IsCreated().WithLabel("panic").Named("panicky").
		Validate(func(context.Context, *vigil.Request[*corev1.ConfigMap]) vigil.Verdict {
			counts := countsOf(nil)
			counts["boom"]++ // a bug: the map was never made
			return admission.Allow()
		})
	vigil.When(policies, &corev1.ConfigMap{}).IsCreated().WithLabel("sleep").Named("sleepy").
		Mutate(func(context.Context, *vigil.Request[*corev1.ConfigMap]) error {
			time.Sleep(time.Minute) // the scenario: a handler that does not finish in time
			return nil
		})
	srv := serveAdmission(t, m, "guard", []string{apps, other})

	warned := &warnings{}
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandler = warned
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	// The API server learns of new webhook configurations through its
	// informers: retry the first create until the mutation shows.
	var first *corev1.Pod
	deadline := time.Now().Add(15 * time.Second)
	for i := 0; ; i++ {
		first = testkit.TestPod(apps, fmt.Sprint("web-", i), map[string]string{"app": "web"}, false)
		if err := c.Create(ctx, first); err != nil {
			t.Fatal(err)
		}
		if first.Labels["vigil.dev/admitted"] == "true" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the API server never called the module's webhooks")
		}
		time.Sleep(100 * time.Millisecond)
	}

	t.Run("warning reaches the client", func(t *testing.T) {
		if !strings.Contains(warned.String(), "image nginx:1.27 is not pinned by digest") {
			t.Fatalf("warnings %q", warned)
		}
	})
	t.Run("denial", func(t *testing.T) {
		err := c.Create(ctx, testkit.TestPod(apps, "root", nil, true))
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "container app is privileged") {
			t.Fatalf("err = %v, want the module's denial", err)
		}
	})
	t.Run("namespace outside the capability", func(t *testing.T) {
		p := testkit.TestPod(other, "root", nil, true)
		if err := c.Create(ctx, p); err != nil {
			t.Fatalf("create in a namespace outside the capability: %v", err)
		}
		if _, ok := p.Labels["vigil.dev/admitted"]; ok {
			t.Fatal("a pod outside the capability's namespaces was mutated")
		}
	})
	t.Run("old object on update", func(t *testing.T) {
		first.Labels["app"] = "changed"
		err := c.Update(ctx, first)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `label app is immutable (was "web")`) {
			t.Fatalf("err = %v, want the immutability denial", err)
		}
	})
	t.Run("custom resource", func(t *testing.T) {
		w := &unstructured.Unstructured{}
		w.SetAPIVersion("example.vigil.dev/v1")
		w.SetKind("Widget")
		w.SetNamespace(apps)
		w.SetName("w")
		if err := c.Create(ctx, w); err != nil {
			t.Fatal(err)
		}
		if size, _, _ := unstructured.NestedInt64(w.Object, "spec", "size"); size != 1 {
			t.Fatalf("spec.size = %d, want the default 1", size)
		}
	})
	t.Run("dry run refuses store writes", func(t *testing.T) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: "dry", Labels: map[string]string{"record": ""}}}
		if err := c.Create(ctx, cm, client.DryRunAll); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(warned.String(), "not recorded: store writes are refused while admitting a dry-run request") {
			t.Fatalf("warnings %q: want the dry-run refusal", warned)
		}
		cm.Name = "wet"
		if err := c.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("panicking binding", func(t *testing.T) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: "p", Labels: map[string]string{"panic": ""}}}
		err := c.Create(ctx, cm)
		if err == nil || !strings.Contains(err.Error(), `capability "policies" binding "panicky" failed (failurePolicy Fail): panic: assignment to entry in nil map`) {
			t.Fatalf("err = %v, want the failure policy's denial naming the binding", err)
		}
	})
	t.Run("hanging binding", func(t *testing.T) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: "s", Labels: map[string]string{"sleep": ""}}}
		began := time.Now()
		err := c.Create(ctx, cm)
		if err == nil || !strings.Contains(err.Error(), `binding "sleepy" failed (failurePolicy Fail): did not finish within 2s`) {
			t.Fatalf("err = %v, want the failure policy's answer before the webhook's timeout", err)
		}
		if took := time.Since(began); took > 4*time.Second {
			t.Fatalf("answered after %s, want before the 4s webhook timeout", took)
		}
		// And the next request is served.
		if err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: "after"}}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("metrics", func(t *testing.T) {
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: srv.CA.Pool()}}}
		resp, err := hc.Get(testkit.MetricsURL(srv.Addr))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, want := range []string{
			`vigil_admission_binding_requests_total{action="validate",binding="no-privileged",capability="policies",module="guard",verdict="denied"} 1`,
			`vigil_admission_binding_requests_total{action="validate",binding="panicky",capability="policies",module="guard",verdict="error"} 1`,
			`vigil_admission_binding_requests_total{action="mutate",binding="sleepy",capability="policies",module="guard",verdict="timeout"} 1`,
			`vigil_admission_binding_duration_seconds_bucket{action="mutate",binding="label-pods"`,
		} {
			if !strings.Contains(string(body), want) {
				t.Errorf("metrics lack %s", want)
			}
		}
	})
	got, _ := storeValue(t, home, "guard", "policies/last")
	if got != "wet" {
		t.Fatalf("store policies/last = %q, want wet (and never the dry-run's name)", got)
	}
}

func storeValue(t *testing.T, ns, name, key string) (string, bool) {
	t.Helper()
	st := &unstructured.Unstructured{}
	st.SetAPIVersion("vigil.dev/v1alpha1")
	st.SetKind("Store")
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, st); err != nil {
		t.Fatal(err)
	}
	v, ok, _ := unstructured.NestedString(st.Object, "data", key)
	return v, ok
}

// The serving certificate is replaced while requests flow through the API
// server: none fails, and the new one is served.
func TestCertificateRotationUnderLoad(t *testing.T) {
	ctx := t.Context()
	apps := env.Namespace(t)
	m := vigil.NewModule("rotate", vigil.Options{Namespace: env.Namespace(t)})
	policies := m.Capability("policies", vigil.InNamespaces(apps))
	vigil.When(policies, &corev1.ConfigMap{}).IsCreated().Mutate(func(_ context.Context, r *vigil.Request[*corev1.ConfigMap]) error {
		r.SetLabel("rotated", "checked")
		return nil
	})
	srv := serveAdmission(t, m, "rotate", []string{apps})
	before := servedSerial(t, srv)
	// The API server takes in a new webhook configuration within a moment:
	// dry runs show when it calls the module, before the load starts.
	vigiltest.Eventually(t, 10*time.Second, func() error {
		probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: "probe"}}
		if err := env.Client.Create(ctx, probe, client.DryRunAll); err != nil {
			return err
		}
		if probe.Labels["rotated"] != "checked" {
			return errors.New("the API server does not call the module's webhook yet")
		}
		return nil
	})

	var created, failed, unmutated atomic.Int64
	var firstErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: fmt.Sprintf("cm-%d-%d", w, i)}}
				if err := env.Client.Create(ctx, cm); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
					continue
				}
				created.Add(1)
				if cm.Labels["rotated"] != "checked" {
					unmutated.Add(1)
				}
			}
		}()
	}
	time.Sleep(time.Second) // the scenario: creates flow for a second before the rotation
	writeServing(t, srv.CA, srv.CertDir)
	deadline := time.Now().Add(20 * time.Second)
	for servedSerial(t, srv) == before {
		if time.Now().After(deadline) {
			t.Fatal("the new certificate was not served within 20s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second) // the scenario: and for a second after it
	close(stop)
	wg.Wait()
	t.Logf("%d creates during rotation, %d failed, %d not mutated", created.Load(), failed.Load(), unmutated.Load())
	if failed.Load() > 0 {
		t.Fatalf("%d requests failed during rotation; first: %v", failed.Load(), firstErr.Load())
	}
	if created.Load() < 20 || unmutated.Load() > 0 {
		t.Fatalf("%d created, %d not mutated: want a steady flow, all mutated", created.Load(), unmutated.Load())
	}
}

// servedSerial is the serial of the certificate the server presents.
func servedSerial(t *testing.T, srv *testkit.Served) string {
	t.Helper()
	conn, err := tls.Dial("tcp", srv.Addr, &tls.Config{RootCAs: srv.CA.Pool()})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

// With --cert-secret the module makes its own CA and serving certificate, in
// a Secret its replicas share, and serves with it.
func TestManagedCertificateSecret(t *testing.T) {
	ns := env.Namespace(t)
	m := vigil.NewModule("managed", vigil.Options{Namespace: ns})
	addr := vigiltest.FreeAddr(t)
	t.Setenv(modcli.EnvHandoffDir, t.TempDir())
	testkit.RunAdmission(t, m, addr, "--cert-secret", "managed-tls", "--kubeconfig", kubeconfig(t), "--shutdown-delay", "0s")
	secret := &corev1.Secret{}
	deadline := time.Now().Add(20 * time.Second)
	for env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "managed-tls"}, secret) != nil {
		if time.Now().After(deadline) {
			t.Fatal("the certificate Secret was not created")
		}
		time.Sleep(50 * time.Millisecond)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(secret.Data["ca.crt"]) {
		t.Fatalf("Secret ca.crt holds no certificate: %q", secret.Data["ca.crt"])
	}
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	for {
		resp, err := hc.Get("https://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server did not answer with the Secret's certificate: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "managed." + ns + ".svc"})
	if err != nil {
		t.Fatalf("the certificate is not valid for the module's Service name: %v", err)
	}
	conn.Close()
}

func countsOf(m map[string]int) map[string]int { return m }

// The admission role registers its own webhooks once it is ready and the API
// server reaches it: nothing is registered while a gate's result is missing.
func TestAdmissionRegistersItselfWhenReady(t *testing.T) {
	ctx := t.Context()
	home, apps := env.Namespace(t), env.Namespace(t)
	name := "self-" + home[len(home)-6:]
	mut, _ := bootstrapConfigs(t, name)
	m := vigil.NewModule(name, vigil.Options{Namespace: home, Version: "1.0.0"})
	vigil.WaitFor(m, &corev1.ConfigMap{}).WithName("ready").InNamespace(home).Named("ready").ToBeCreated(nil)
	policies := m.Capability("policies", vigil.InNamespaces(apps))
	vigil.When(policies, &corev1.ConfigMap{}).IsCreated().Mutate(func(_ context.Context, r *vigil.Request[*corev1.ConfigMap]) error {
		r.SetLabel("registered", "yes")
		return nil
	})
	vigil.When(policies, &corev1.ConfigMap{}).IsCreated().Named("no-bad").Validate(func(_ context.Context, r *vigil.Request[*corev1.ConfigMap]) vigil.Verdict {
		if r.HasLabel("bad") {
			return admission.Deny("label bad is not allowed")
		}
		return admission.Allow()
	})
	// In Audit mode: what it denies is admitted, and the periodic audit
	// reports it.
	trial := m.Capability("trial", vigil.InNamespaces(apps), vigil.Mode(vigil.ModeAudit))
	vigil.When(trial, &corev1.ConfigMap{}).IsCreated().Named("no-trial-bad").Validate(func(_ context.Context, r *vigil.Request[*corev1.ConfigMap]) vigil.Verdict {
		if r.HasLabel("trial-bad") {
			return admission.Deny("label trial-bad is not allowed yet")
		}
		return admission.Allow()
	})
	// Created before the module registers: it passes unchecked, and the audit
	// the watcher runs once the webhooks enforce must report it.
	sneaky := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: "sneaky", Labels: map[string]string{"bad": ""}}}
	if err := env.Client.Create(ctx, sneaky); err != nil {
		t.Fatal(err)
	}
	ca, certDir := testkit.ServingDir(t)
	addr := vigiltest.FreeAddr(t)
	t.Setenv(modcli.EnvHandoffDir, t.TempDir())
	testkit.RunAdmission(t, m, addr, "--cert-dir", certDir, "--kubeconfig", kubeconfig(t), "--shutdown-delay", "0s",
		"--webhook-url", "https://"+addr, "--registration-check-interval", "200ms")
	testkit.RunWatcher(t, m, kubeconfig(t), "--audit-interval", "1s", "--lease-duration", "3s", "--renew-deadline", "2s", "--retry-period", "500ms")

	// Not ready: the gate's result is not handed over, so nothing registers
	// in 1.5s, over seven registration checks.
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{}
	vigiltest.Consistently(t, 1500*time.Millisecond, func() error {
		if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, cfg); err != nil {
			t.Fatal(err)
		}
		if len(cfg.Webhooks) != 0 {
			return fmt.Errorf("registered before the module was ready: %+v", cfg.Webhooks)
		}
		return nil
	})
	// The gate's init container runs; the module becomes ready and registers.
	if err := env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: home, Name: "ready"}}); err != nil {
		t.Fatal(err)
	}
	if code := vigil.Execute(ctx, m, []string{"gate", "--phase", "0", "--kubeconfig", kubeconfig(t)}); code != 0 {
		t.Fatalf("gate exit %d", code)
	}
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		c := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: fmt.Sprint("probe-", i)}}
		if err := env.Client.Create(ctx, c); err != nil {
			t.Fatalf("a request was rejected while the module registered: %v", err)
		}
		if c.Labels["registered"] == "yes" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the module never registered its webhooks")
		}
		time.Sleep(100 * time.Millisecond)
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, cfg); err != nil {
			t.Fatal(err)
		}
		if len(cfg.Webhooks) == 2 && *cfg.Webhooks[0].FailurePolicy == admissionregistrationv1.Fail && strings.HasPrefix(cfg.Webhooks[1].Name, "canary.") {
			break // the capability's, enforced, and the canary
		}
		if time.Now().After(deadline) {
			t.Fatalf("webhooks %+v: want enforced with Fail after the canary", cfg.Webhooks)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The audit reports what passed before registration, on the object,
	// saying so and naming the policy version.
	// auditEvent waits for an audit Event on the object that says all of
	// want: the audit runs every second, before registration too (when its
	// findings cannot say when the object got in).
	auditEvent := func(name string, want ...string) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		var seen []string
		for {
			evs := &corev1.EventList{}
			if err := env.Client.List(ctx, evs, client.InNamespace(apps)); err != nil {
				t.Fatal(err)
			}
			for _, e := range evs.Items {
				if e.Reason != "AuditViolation" {
					continue
				}
				if e.InvolvedObject.Name != "sneaky" && e.InvolvedObject.Name != "late" {
					t.Fatalf("audit reported %s, which violates nothing", e.InvolvedObject.Name)
				}
				if e.InvolvedObject.Name != name {
					continue
				}
				seen = append(seen, e.Message)
				all := true
				for _, w := range want {
					all = all && strings.Contains(e.Message, w)
				}
				if all {
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("the audit reported no Event on %s saying %q; it said %q", name, want, seen)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	auditEvent("sneaky", "vigil module "+name+" (version 1.0.0), capability policies", "before the webhooks enforced (since ", "it passed unchecked", "label bad is not allowed")
	// The findings outlast the Events: each capability's last report is
	// kept in the module's Store.
	report := func(capability string, want ...string) {
		t.Helper()
		vigiltest.Eventually(t, 15*time.Second, func() error {
			v, _ := storeValue(t, home, name, capability+"/vigil.audit")
			for _, w := range want {
				if !strings.Contains(v, w) {
					return fmt.Errorf("the %s audit report %q lacks %q", capability, v, w)
				}
			}
			return nil
		})
	}
	report("policies", `"policyVersion":"1.0.0"`, `"registeredVersion":"1.0.0"`, `"enforcedSince":"20`, `"count":1,`,
		`"name":"sneaky","action":"validate","created":"20`, `"admitted":"before-enforcement","violation":"label bad is not allowed"`)
	// Admitted while enforced, by the capability in Audit mode: the next
	// periodic audit reports it as such.
	// creationTimestamp has second precision: a second after enforcement
	// began, an object is told from those created before it.
	time.Sleep(1100 * time.Millisecond)
	late := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: "late", Labels: map[string]string{"trial-bad": ""}}}
	if err := env.Client.Create(ctx, late); err != nil {
		t.Fatalf("a create denied only by a capability in Audit mode: %v, want admitted", err)
	}
	auditEvent("late", "capability trial", "while the webhooks of version 1.0.0 enforced", "Warn or Audit mode", "label trial-bad is not allowed yet")
	report("trial", `"count":1,`, `"name":"late"`, `"admitted":"while-enforced","violation":"label trial-bad is not allowed yet"`)
	report("policies", `"count":1,`, `"name":"sneaky"`)

	// An admin deletes a configuration: reported, not recreated.
	if err := env.Client.Delete(ctx, mut); err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}}}
	deadline = time.Now().Add(10 * time.Second)
	for {
		_, ready := testkit.HTTPGet(hc, "https://"+addr+"/readyz")
		_, metrics := testkit.HTTPGet(hc, testkit.MetricsURL(addr))
		if strings.Contains(ready, "webhook configuration missing") &&
			strings.Contains(metrics, `vigil_registration_configuration_missing{module="`+name+`"} 1`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a deleted configuration was not reported:\nreadyz: %s", ready)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, &admissionregistrationv1.MutatingWebhookConfiguration{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the deleted configuration was recreated: %v", err)
	}
}

// plan says per capability whether it is fail-closed or registered when
// ready, what may pass unchecked before registration, and what its webhooks
// never see: every exclusion, the opt-out label with who may set it.
func TestPlanShowsCapabilities(t *testing.T) {
	m := vigil.NewModule("planned", vigil.Options{})
	vigil.WaitFor(m, &corev1.ConfigMap{}).WithName("settings").InNamespace("apps").ToBeCreated(nil)
	_, _, gateLine, _ := runtime.Caller(0)
	gateLine-- // the WaitFor above: plan names the gate's call site
	strict := m.Capability("strict", vigil.FailClosed(), vigil.InNamespaces("apps"))
	vigil.When(strict, &corev1.Pod{}).IsCreated().Named("no-root").Validate(func(context.Context, *vigil.Request[*corev1.Pod]) vigil.Verdict { return admission.Allow() })
	lenient := m.Capability("lenient", vigil.OptOutLabel("vigil.dev/ignore", "alice", "group:admins"))
	vigil.When(lenient, &corev1.ConfigMap{}).IsCreatedOrUpdated().Named("label").Mutate(func(context.Context, *vigil.Request[*corev1.ConfigMap]) error { return nil })
	trial := m.Capability("trial", vigil.Mode(vigil.ModeAudit))
	vigil.When(trial, &corev1.Pod{}).IsCreated().Named("no-latest").Validate(func(context.Context, *vigil.Request[*corev1.Pod]) vigil.Verdict { return admission.Allow() })
	out := testkit.CaptureStdout(t, func() {
		if code := vigil.Execute(t.Context(), m, []string{"plan"}); code != 0 {
			t.Errorf("plan exit %d", code)
		}
	})
	for _, want := range []string{
		"strict (in apps): fail-closed: static webhooks with failurePolicy Fail from install on; only what they never see passes unchecked",
		"lenient (cluster-wide): registered when ready (failurePolicy Ignore until the canary proves the API server reaches the module, then Fail); until then these pass unchecked",
		"label mutate ConfigMap CREATE,UPDATE (admission_test.go:",
		"strict (in apps): fail-closed: static webhooks with failurePolicy Fail from install on; only what they never see passes unchecked\n    mode Enforce: its validations' denials are enforced\n",
		"lenient (cluster-wide): registered when ready (failurePolicy Ignore until the canary proves the API server reaches the module, then Fail); until then these pass unchecked (the audit after registration reports them):\n    mode Enforce: its validations' denials are enforced\n",
		"watcher (one active replica, by leader election):\n  audit: the validations over the existing objects, once the webhooks enforce and every --audit-interval",
		"trial (cluster-wide): registered when ready (failurePolicy Ignore until the canary proves the API server reaches the module, then Fail); until then these pass unchecked (the audit after registration reports them):\n    mode Audit: its validations' denials are not enforced: answered as allows, silently, and recorded as findings (log event audit-finding, vigil_admission_unenforced_denials_total); mutations apply as ever\n",
		"no-root validate Pod CREATE (admission_test.go:",
		"never sent to its webhooks, so these pass unchecked even while it enforces:",
		"objects in namespaces kube-node-lease, kube-system, vigil-system, and those Namespaces themselves (namespaceSelector)",
		"Nodes, Leases (coordination.k8s.io), CertificateSigningRequests (certificates.k8s.io): cluster plumbing (matchCondition)",
		fmt.Sprintf("ConfigMap settings in namespace apps: gate configmap-settings (admission_test.go:%d) waits for it, so exactly this one object (matchCondition)", gateLine),
		"namespaces and objects labelled vigil.dev/ignore=true, and every object in such a namespace (namespaceSelector, objectSelector); only alice, group:admins may set, change or remove the label (ValidatingAdmissionPolicy planned-lenient-opt-out)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}
	// The opt-out is the lenient capability's only: listed once.
	if n := strings.Count(out, "labelled vigil.dev/ignore=true"); n != 1 {
		t.Errorf("the opt-out label is listed %d times, want once (lenient's):\n%s", n, out)
	}
	if n := strings.Count(out, "never sent to its webhooks"); n != 3 {
		t.Errorf("%d lists of exclusions, want one per capability:\n%s", n, out)
	}
}

// GateResult reads the handoff folder the admission role was given with
// --handoff-dir, even when VIGIL_HANDOFF_DIR names another; once the role
// ends, it no longer does: a gate phase run later with another folder is
// read from that one.
func TestGateResultReadsTheRolesHandoffDir(t *testing.T) {
	ns := env.Namespace(t)
	m := vigil.NewModule("handoff-flag", vigil.Options{Namespace: ns})
	vigil.Sample(m, func(context.Context) (string, error) { return "from-the-gate", nil }, vigil.Every(time.Second)).
		Named("word").ToMatch(func(string) bool { return true })
	vigil.When(m.Capability("words"), &corev1.ConfigMap{}).IsCreated().
		Mutate(func(ctx context.Context, r *vigil.Request[*corev1.ConfigMap]) error {
			word, found, err := vigil.GateResult[string](m, "word")
			if err != nil {
				return err
			}
			if !found {
				return errors.New("the gate's result is not in the handoff folder")
			}
			r.SetLabel("word", word)
			return nil
		})
	dir := t.TempDir()
	if code := vigil.Execute(t.Context(), m, []string{"gate", "--phase", "0", "--kubeconfig", kubeconfig(t), "--handoff-dir", dir}); code != 0 {
		t.Fatalf("gate exited %d", code)
	}
	srv := serveAdmission(t, m, "handoff-flag", []string{ns}, "--handoff-dir", dir) // VIGIL_HANDOFF_DIR names another folder
	// The API server takes in a new webhook configuration within a moment:
	// dry runs show when it calls the module.
	vigiltest.Eventually(t, 10*time.Second, func() error {
		probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"}}
		if err := env.Client.Create(t.Context(), probe, client.DryRunAll); err != nil {
			return err
		}
		if _, ok := probe.Labels["word"]; !ok {
			return errors.New("the API server does not call the module's webhook yet")
		}
		return nil
	})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "worded"}}
	if err := env.Client.Create(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	if cm.Labels["word"] != "from-the-gate" {
		t.Fatalf("labels %v: the handler did not read the gate's result from --handoff-dir", cm.Labels)
	}

	// The role ends; its folder goes. A gate phase run with another folder,
	// named by VIGIL_HANDOFF_DIR, is what GateResult reads now.
	srv.Stop()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	later := t.TempDir()
	t.Setenv(modcli.EnvHandoffDir, later)
	if code := vigil.Execute(t.Context(), m, []string{"gate", "--phase", "0", "--kubeconfig", kubeconfig(t), "--handoff-dir", later}); code != 0 {
		t.Fatalf("gate exited %d", code)
	}
	word, found, err := vigil.GateResult[string](m, "word")
	if err != nil || !found || word != "from-the-gate" {
		t.Errorf("GateResult after the role ended = %q, %t, %v; want the result in %s, where the later gate phase wrote it (not the ended role's folder)", word, found, err, later)
	}
}

// Requests the module cannot attribute, sent by the real API server: a Pod
// validation handed a ConfigMap, and a path the module does not serve. The
// failure policy answers each, naming what was expected, and the metric
// counts them.
func TestUnattributedRequestsThroughTheAPIServer(t *testing.T) {
	ctx := t.Context()
	apps, home := env.Namespace(t), env.Namespace(t)
	m := vigil.NewModule("unattr", vigil.Options{Namespace: home, WebhookTimeout: 4 * time.Second})
	vigil.When(m.Capability("policies", vigil.InNamespaces(apps)), &corev1.Pod{}).IsCreated().Named("no-privileged").
		Validate(func(_ context.Context, r *vigil.Request[*corev1.Pod]) vigil.Verdict {
			if c := r.Object.Spec.Containers[0]; c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged {
				return admission.Deny("privileged pods are not allowed")
			}
			return admission.Allow()
		})
	srv := serveAdmission(t, m, "unattr", []string{apps})
	testkit.Eventually(t, 15*time.Second, "the module's Pod validation to apply", func() bool {
		err := env.Client.Create(ctx, testkit.TestPod(apps, fmt.Sprint("root-", time.Now().UnixNano()), nil, true))
		return err != nil && strings.Contains(err.Error(), "privileged pods are not allowed")
	})

	// Configurations wider than the module: its validate path for
	// ConfigMaps, and a path it does not serve for Secrets.
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: apps}}
	hook := func(name, path, resource string) admissionregistrationv1.ValidatingWebhook {
		return admissionregistrationv1.ValidatingWebhook{
			Name: name, ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://" + srv.Addr + path), CABundle: srv.CA.CertPEM},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{resource}},
			}},
			NamespaceSelector: selector, FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds: ptr.To[int32](5),
		}
	}
	wide := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "unattr-wide-" + apps},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{
			hook("configmaps.unattr.vigil.dev", admit.ValidatePath("unattr"), "configmaps"),
			hook("other.unattr.vigil.dev", "/validate/other", "secrets"),
		},
	}
	if err := env.Client.Create(ctx, wide); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), wide) })

	var cmErr, secretErr error
	testkit.Eventually(t, 15*time.Second, "the ConfigMap to be refused", func() bool {
		cmErr = env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: apps, GenerateName: "cm-"}})
		return cmErr != nil
	})
	if want := regexp.MustCompile(`vigil module unattr has no binding at /validate/unattr for CREATE of ConfigMap \(v1\) cm-\w+: expected CREATE of Pod \(v1\) \(failurePolicy Fail\)`); !want.MatchString(cmErr.Error()) {
		t.Fatalf("ConfigMap: %v, want the failure policy's answer %s", cmErr, want)
	}
	testkit.Eventually(t, 15*time.Second, "the Secret to be refused", func() bool {
		secretErr = env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: apps, GenerateName: "s-"}})
		return secretErr != nil
	})
	if want := regexp.MustCompile(`vigil module unattr does not serve path /validate/other \(request for CREATE of Secret \(v1\) s-\w+\): expected /mutate/unattr, /validate/unattr or /canary/unattr \(failurePolicy Fail\)`); !want.MatchString(secretErr.Error()) {
		t.Fatalf("Secret: %v, want the failure policy's answer %s", secretErr, want)
	}
	// An ordinary Pod still passes.
	if err := env.Client.Create(ctx, testkit.TestPod(apps, "web", nil, false)); err != nil {
		t.Fatalf("an ordinary pod: %v", err)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: srv.CA.Pool()}}}
	_, metrics := testkit.HTTPGet(hc, testkit.MetricsURL(srv.Addr))
	for _, want := range []string{
		`vigil_admission_unattributed_total{answer="failure_policy",module="unattr",reason="kind"} 1`,
		`vigil_admission_unattributed_total{answer="failure_policy",module="unattr",reason="path"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
