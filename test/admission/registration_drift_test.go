package admission

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/commands/modcli"
	"github.com/vigilkit/vigil/internal/serving/certs"
	"github.com/vigilkit/vigil/internal/serving/registration"
	"github.com/vigilkit/vigil/internal/testsupport/testkit"
	"github.com/vigilkit/vigil/vigiltest"
)

// The admission role keeps its registration true at its default check
// interval: webhooks edited (failurePolicy Ignore, a selector that matches
// nothing, other rules), emptied by a re-apply of the manifests' empty
// configurations, or given a wrong caBundle are repaired within seconds and
// each repair is reported (an Event on the pod, a metric); a configuration
// deleted outright is reported in /readyz and a metric, and not re-created.
func TestAdmissionKeepsItsRegistrationTrue(t *testing.T) {
	ctx := t.Context()
	home, apps := env.Namespace(t), env.Namespace(t)
	name := "keep-" + home[len(home)-6:]
	bootstrapConfigs(t, name)
	m := vigil.NewModule(name, vigil.Options{Namespace: home, Version: "1.0.0"})
	policies := m.Capability("policies", vigil.InNamespaces(apps))
	vigil.When(policies, &corev1.ConfigMap{}).IsCreated().Named("label").Mutate(func(_ context.Context, r *vigil.Request[*corev1.ConfigMap]) error {
		r.SetLabel("kept", "yes")
		return nil
	})
	vigil.When(policies, &corev1.ConfigMap{}).IsCreated().Named("no-bad").Validate(func(_ context.Context, r *vigil.Request[*corev1.ConfigMap]) vigil.Verdict {
		if r.HasLabel("bad") {
			return admission.Deny("label bad is not allowed")
		}
		return admission.Allow()
	})
	ca, certDir := testkit.ServingDir(t)
	addr := vigiltest.FreeAddr(t)
	t.Setenv(modcli.EnvHandoffDir, t.TempDir())
	pod := name + "-admission"
	t.Setenv("POD_NAME", pod)
	t.Setenv("POD_NAMESPACE", home)
	// No --registration-check-interval: the default is what is measured.
	flags := []string{"--cert-dir", certDir, "--kubeconfig", kubeconfig(t), "--shutdown-delay", "0s", "--webhook-url", "https://" + addr}
	stop := testkit.RunAdmission(t, m, addr, flags...)

	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}}}
	metric := func(series string) int {
		_, body := testkit.HTTPGet(hc, testkit.MetricsURL(addr))
		match := regexp.MustCompile(regexp.QuoteMeta(series) + ` (\d+)`).FindStringSubmatch(body)
		if match == nil {
			return -1
		}
		n, _ := strconv.Atoi(match[1])
		return n
	}
	repairs := `vigil_registration_repairs_total{module="` + name + `"}`
	n := 0
	// enforced: both webhooks apply, through the API server.
	enforced := func() error {
		n++
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: fmt.Sprint("kept-", n)}}
		if err := env.Client.Create(ctx, cm); err != nil {
			return fmt.Errorf("an ordinary create: %w", err)
		}
		if cm.Labels["kept"] != "yes" {
			return fmt.Errorf("the mutation did not apply: labels %v", cm.Labels)
		}
		bad := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: fmt.Sprint("bad-", n), Labels: map[string]string{"bad": ""}}}
		if err := env.Client.Create(ctx, bad); err == nil || !strings.Contains(err.Error(), "label bad is not allowed") {
			return fmt.Errorf("the validation did not apply: %v", err)
		}
		for _, cfg := range configs(t, name) {
			for _, w := range cfg.hooks {
				if !strings.HasPrefix(w.name, "canary.") && w.policy != admissionregistrationv1.Fail {
					return fmt.Errorf("%s has failurePolicy %s", w.name, w.policy)
				}
			}
		}
		return nil
	}
	vigiltest.Eventually(t, 30*time.Second, enforced)
	if got := metric(repairs); got != 0 {
		t.Fatalf("%s = %d after the first registration, want 0", repairs, got)
	}

	other, err := certs.NewCA("someone-else", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	mutate := func(edit func(*admissionregistrationv1.MutatingWebhook), editV func(*admissionregistrationv1.ValidatingWebhook)) {
		mut := &admissionregistrationv1.MutatingWebhookConfiguration{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, mut); err != nil {
			t.Fatal(err)
		}
		for i := range mut.Webhooks {
			if !strings.HasPrefix(mut.Webhooks[i].Name, "canary.") {
				edit(&mut.Webhooks[i])
			}
		}
		if err := env.Client.Update(ctx, mut); err != nil {
			t.Fatal(err)
		}
		val := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, val); err != nil {
			t.Fatal(err)
		}
		for i := range val.Webhooks {
			if !strings.HasPrefix(val.Webhooks[i].Name, "canary.") {
				editV(&val.Webhooks[i])
			}
		}
		if err := env.Client.Update(ctx, val); err != nil {
			t.Fatal(err)
		}
	}
	nothing := &metav1.LabelSelector{MatchLabels: map[string]string{"matches": "nothing"}}
	for i, c := range []struct {
		kind  string
		drift func()
		want  string
	}{
		{"edited", func() {
			mutate(func(w *admissionregistrationv1.MutatingWebhook) {
				w.FailurePolicy, w.NamespaceSelector, w.Rules[0].Resources = ptr.To(admissionregistrationv1.Ignore), nothing, []string{"secrets"}
			}, func(w *admissionregistrationv1.ValidatingWebhook) {
				w.FailurePolicy, w.NamespaceSelector, w.Rules[0].Resources = ptr.To(admissionregistrationv1.Ignore), nothing, []string{"secrets"}
			})
		}, "failurePolicy Ignore (want Fail), namespaceSelector"},
		{"emptied by a re-apply", func() {
			mut, val := registration.Bootstrap(name)
			for _, o := range []client.Object{mut, val} {
				if err := env.Client.Delete(ctx, o); err != nil {
					t.Fatal(err)
				}
			}
			// Deleted outright: reported, not re-created.
			vigiltest.Eventually(t, 10*time.Second, func() error {
				_, ready := testkit.HTTPGet(hc, "https://"+addr+"/readyz")
				if !strings.Contains(ready, "webhook configuration missing") || metric(`vigil_registration_configuration_missing{module="`+name+`"}`) != 1 {
					return fmt.Errorf("a deleted configuration is not reported: readyz %q", ready)
				}
				return nil
			})
			vigiltest.Consistently(t, 2*admissionroleCheckInterval+time.Second, func() error {
				if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, &admissionregistrationv1.MutatingWebhookConfiguration{}); !apierrors.IsNotFound(err) {
					return fmt.Errorf("the deleted configuration was re-created: %v", err)
				}
				return nil
			})
			// Re-applied as the manifests ship them: empty.
			mut, val = registration.Bootstrap(name)
			for _, o := range []client.Object{mut, val} {
				if err := env.Client.Create(ctx, o); err != nil {
					t.Fatal(err)
				}
			}
		}, "emptied (no webhooks, no registration record)"},
		{"wrong caBundle", func() {
			mutate(func(w *admissionregistrationv1.MutatingWebhook) { w.ClientConfig.CABundle = other.CertPEM },
				func(w *admissionregistrationv1.ValidatingWebhook) { w.ClientConfig.CABundle = other.CertPEM })
			// Until the repair, creates fail (x509) — unless the next check
			// came first.
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: "x509"}}
			t.Logf("a create with the wrong caBundle in place: %v", env.Client.Create(ctx, cm))
		}, "caBundle"},
	} {
		t.Run(c.kind, func(t *testing.T) {
			c.drift()
			began := time.Now()
			deadline := began.Add(15 * time.Second)
			warned := false
			for {
				// Once /readyz warned, it says nothing is wrong only after the
				// repair was written.
				_, ready := testkit.HTTPGet(hc, "https://"+addr+"/readyz")
				warned = warned || strings.Contains(ready, "warning")
				if warned && !strings.Contains(ready, "warning") {
					for _, cfg := range configs(t, name) {
						if len(cfg.hooks) == 0 {
							t.Fatalf("/readyz says %q while a configuration is empty", ready)
						}
						for _, w := range cfg.hooks {
							if !strings.HasPrefix(w.name, "canary.") && w.policy != admissionregistrationv1.Fail {
								t.Fatalf("/readyz says %q while %s has failurePolicy %s", ready, w.name, w.policy)
							}
						}
					}
				}
				err := enforced()
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: not repaired in 15s: %v", c.kind, err)
				}
				time.Sleep(50 * time.Millisecond)
			}
			took := time.Since(began)
			t.Logf("%s: repaired and enforced again %s after the drift", c.kind, took.Round(10*time.Millisecond))
			if limit := admissionroleCheckInterval + 3*time.Second; took > limit {
				t.Errorf("%s: repaired after %s, want within %s", c.kind, took, limit)
			}
			vigiltest.Eventually(t, 5*time.Second, func() error {
				if got := metric(repairs); got != i+1 {
					return fmt.Errorf("%s = %d, want %d", repairs, got, i+1)
				}
				evs := &corev1.EventList{}
				if err := env.Client.List(ctx, evs, client.InNamespace(home)); err != nil {
					return err
				}
				found, named := 0, false
				for _, e := range evs.Items {
					if e.InvolvedObject.Name == pod && e.Reason == "WebhookConfigurationRepaired" && e.Type == corev1.EventTypeWarning {
						found++
						named = named || strings.Contains(e.Message, c.want)
					}
				}
				if found != i+1 || !named {
					return fmt.Errorf("%d WebhookConfigurationRepaired Events on the pod (want %d), one naming %q: %v", found, i+1, c.want, named)
				}
				return nil
			})
			if _, ready := testkit.HTTPGet(hc, "https://"+addr+"/readyz"); strings.Contains(ready, "warning") {
				t.Fatalf("/readyz still warns after the repair: %q", ready)
			}
		})
	}

	// A replica that starts into a drifted configuration repairs it as it
	// registers, and reports it.
	stop()
	mutate(func(w *admissionregistrationv1.MutatingWebhook) {
		w.FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
	},
		func(w *admissionregistrationv1.ValidatingWebhook) {
			w.FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
		})
	testkit.RunAdmission(t, m, addr, flags...)
	vigiltest.Eventually(t, 30*time.Second, enforced)
	vigiltest.Eventually(t, 5*time.Second, func() error {
		evs := &corev1.EventList{}
		if err := env.Client.List(ctx, evs, client.InNamespace(home)); err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Reason == "WebhookConfigurationRepaired" && strings.Contains(e.Message, "failurePolicy Ignore (want Fail)") && !strings.Contains(e.Message, "namespaceSelector") {
				return nil
			}
		}
		return errors.New("the replica that started into drift did not report its repair")
	})
	if got := metric(repairs); got != 1 {
		t.Fatalf("%s = %d on the new replica, want 1", repairs, got)
	}
}

// admissionroleCheckInterval is the admission role's default check interval
// (admissionrole.CheckInterval).
const admissionroleCheckInterval = 2 * time.Second

type hookState struct {
	name   string
	policy admissionregistrationv1.FailurePolicyType
}

type configState struct{ hooks []hookState }

func configs(t *testing.T, name string) []configState {
	t.Helper()
	var out []configState
	mut := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Name: name}, mut); err == nil {
		var c configState
		for _, w := range mut.Webhooks {
			c.hooks = append(c.hooks, hookState{w.Name, *w.FailurePolicy})
		}
		out = append(out, c)
	}
	val := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Name: name}, val); err == nil {
		var c configState
		for _, w := range val.Webhooks {
			c.hooks = append(c.hooks, hookState{w.Name, *w.FailurePolicy})
		}
		out = append(out, c)
	}
	return out
}
