package admission

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/testsupport/testkit"
)

// Capabilities in Warn and Audit mode, called by the real API server: their
// denials are answered as allows — with the denial as a warning in Warn
// mode, silently and counted in Audit mode — while an enforced capability
// of the same module still denies.
func TestModesThroughTheAPIServer(t *testing.T) {
	ctx := t.Context()
	apps := env.Namespace(t)
	home := env.Namespace(t)

	m := vigil.NewModule("modal", vigil.Options{Namespace: home, WebhookTimeout: 4 * time.Second})
	deny := func(label string) func(context.Context, *vigil.Request[*corev1.Pod]) vigil.Verdict {
		return func(_ context.Context, r *vigil.Request[*corev1.Pod]) vigil.Verdict {
			if r.Object.Labels[label] == "true" {
				return admission.Deny("pod " + r.Name + " is labelled " + label)
			}
			return admission.Allow()
		}
	}
	vigil.When(m.Capability("trial", vigil.Mode(vigil.ModeWarn)), &corev1.Pod{}).IsCreated().Named("warned").Validate(deny("warn-me"))
	vigil.When(m.Capability("audited", vigil.Mode(vigil.ModeAudit)), &corev1.Pod{}).IsCreated().Named("audited").Validate(deny("audit-me"))
	vigil.When(m.Capability("enforced", vigil.Mode(vigil.ModeEnforce)), &corev1.Pod{}).IsCreated().Named("enforced").Validate(deny("deny-me"))
	srv := serveAdmission(t, m, "modal", []string{apps})

	warned := &warnings{}
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandler = warned
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	// The API server learns of new webhook configurations through its
	// informers: retry until the enforced capability denies.
	deadline := time.Now().Add(15 * time.Second)
	for i := 0; ; i++ {
		err := c.Create(ctx, testkit.TestPod(apps, fmt.Sprint("probe-", i), map[string]string{"deny-me": "true"}, false))
		if apierrors.IsForbidden(err) && strings.Contains(err.Error(), "is labelled deny-me") {
			break
		}
		if err != nil && !apierrors.IsForbidden(err) {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the API server never called the module's webhooks: last err %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	t.Run("warn admits with a warning", func(t *testing.T) {
		if err := c.Create(ctx, testkit.TestPod(apps, "warned", map[string]string{"warn-me": "true"}, false)); err != nil {
			t.Fatalf("create: %v, want admitted", err)
		}
		want := `vigil module modal: capability "trial" binding "warned" would deny this (mode Warn, not enforced): pod warned is labelled warn-me`
		if !strings.Contains(warned.String(), want) {
			t.Fatalf("warnings %q, want %q", warned, want)
		}
	})
	t.Run("audit admits silently and counts the finding", func(t *testing.T) {
		before := warned.String()
		if err := c.Create(ctx, testkit.TestPod(apps, "audited", map[string]string{"audit-me": "true"}, false)); err != nil {
			t.Fatalf("create: %v, want admitted", err)
		}
		if after := warned.String(); after != before {
			t.Errorf("warnings %q after an audited create, want none added to %q", after, before)
		}
		got := testkit.GrepLines(testkit.Scrape(t, testkit.MetricsURL(srv.Addr)), "vigil_admission_unenforced_denials_total{")
		want := `vigil_admission_unenforced_denials_total{binding="audited",capability="audited",mode="Audit",module="modal"} 1`
		if !strings.Contains(got, want) {
			t.Errorf("metrics %q, want %q", got, want)
		}
	})
	t.Run("enforce still denies", func(t *testing.T) {
		err := c.Create(ctx, testkit.TestPod(apps, "denied", map[string]string{"deny-me": "true", "warn-me": "true", "audit-me": "true"}, false))
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "pod denied is labelled deny-me") {
			t.Fatalf("err = %v, want the enforced capability's denial", err)
		}
	})
}

// A capability with JoinDenials runs every validation and answers with all
// their denials, joined with "; " in declaration order, as Pepr answers;
// without it the first denial answers alone.
func TestJoinDenialsThroughTheAPIServer(t *testing.T) {
	ctx := t.Context()
	apps := env.Namespace(t)
	home := env.Namespace(t)

	m := vigil.NewModule("joined", vigil.Options{Namespace: home, WebhookTimeout: 4 * time.Second})
	deny := func(label, msg string) func(context.Context, *vigil.Request[*corev1.Pod]) vigil.Verdict {
		return func(_ context.Context, r *vigil.Request[*corev1.Pod]) vigil.Verdict {
			if r.Object.Labels[label] == "true" {
				return admission.Deny(msg)
			}
			return admission.Allow()
		}
	}
	joined := m.Capability("joined", vigil.JoinDenials())
	vigil.When(joined, &corev1.Pod{}).IsCreated().Named("first").Validate(deny("a", "first says no"))
	vigil.When(joined, &corev1.Pod{}).IsCreated().Named("second").Validate(deny("b", "second says no"))
	vigil.When(joined, &corev1.Pod{}).IsCreated().Named("third").Validate(deny("c", "third says no"))
	single := m.Capability("single")
	vigil.When(single, &corev1.Pod{}).IsCreated().Named("fourth").Validate(deny("d", "fourth says no"))
	vigil.When(single, &corev1.Pod{}).IsCreated().Named("fifth").Validate(deny("d", "fifth says no"))
	serveAdmission(t, m, "joined", []string{apps})

	deadline := time.Now().Add(15 * time.Second)
	for i := 0; ; i++ {
		err := env.Client.Create(ctx, testkit.TestPod(apps, fmt.Sprint("probe-", i), map[string]string{"a": "true"}, false))
		if apierrors.IsForbidden(err) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the API server never called the module's webhooks")
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, c := range []struct {
		labels    map[string]string
		want      string
		wantNoMsg string
	}{
		{map[string]string{"a": "true", "c": "true"}, "first says no; third says no", "second"},
		{map[string]string{"b": "true"}, "denied the request: second says no", "first"},
		{map[string]string{"a": "true", "b": "true", "c": "true"}, "first says no; second says no; third says no", "fourth"},
		{map[string]string{"d": "true"}, "denied the request: fourth says no", "fifth"},
	} {
		err := env.Client.Create(ctx, testkit.TestPod(apps, "joined", c.labels, false))
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), c.wantNoMsg) {
			t.Errorf("a Pod labelled %v: %v; want a denial saying %q and nothing of %q", c.labels, err, c.want, c.wantNoMsg)
		}
	}
	if err := env.Client.Create(ctx, testkit.TestPod(apps, "plain", nil, false)); err != nil {
		t.Errorf("a Pod no validation denies: %v, want it admitted", err)
	}
}

// FailurePolicyIn's mistakes fail the definition at start, each at its
// call; plan shows a valid one and the webhook it gets.
func TestFailurePolicyInMistakesAndPlan(t *testing.T) {
	for _, c := range []struct {
		opt  vigil.CapabilityOption
		want string
	}{
		{vigil.FailurePolicyIn("Maybe", "istio-system"), `FailurePolicyIn("Maybe", ...): expected admission.Fail or admission.Ignore`},
		{vigil.FailurePolicyIn(admission.Ignore), "FailurePolicyIn(Ignore): name the namespaces it applies in"},
		{vigil.FailurePolicyIn(admission.Ignore, "Istio_System"), `FailurePolicyIn(Ignore, "Istio_System"): not a namespace name`},
	} {
		m := vigil.NewModule("nsp", vigil.Options{Namespace: "nsp-system"})
		vigil.When(m.Capability("policies", c.opt), &corev1.Pod{}).IsCreated().
			Validate(func(context.Context, *vigil.Request[*corev1.Pod]) vigil.Verdict { return admission.Allow() })
		err := m.Verify()
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "modes_test.go:") {
			t.Errorf("Verify() = %v; want a failure at the call saying %q", err, c.want)
		}
	}
	m := vigil.NewModule("nsp", vigil.Options{Namespace: "nsp-system"})
	vigil.When(m.Capability("policies", vigil.FailurePolicyIn(admission.Ignore, "istio-system")), &corev1.Pod{}).IsCreated().
		Validate(func(context.Context, *vigil.Request[*corev1.Pod]) vigil.Verdict { return admission.Allow() })
	code, out := testkit.RunCapture(t, m, "plan")
	if code != 0 || !strings.Contains(out, "failurePolicy Ignore in namespaces istio-system (FailurePolicyIn, modes_test.go:") {
		t.Errorf("plan (exit %d) does not show the namespace policy:\n%s", code, out)
	}
}
