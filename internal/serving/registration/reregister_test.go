package registration_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/serving/registration"
	"github.com/vigilkit/vigil/vigiltest"
)

// denied reports whether creating a Pod in ns is refused by the stand-in
// module (it denies every Pod its webhook is called for).
func denied(t *testing.T, ns, module string) error {
	t.Helper()
	p := pod(ns, fmt.Sprint("try-", time.Now().UnixNano()))
	err := env.Client.Create(t.Context(), p)
	if err == nil {
		_ = env.Client.Delete(context.Background(), p)
		return fmt.Errorf("pod %s/%s admitted: want denied by %s", ns, p.Name, module)
	}
	if !strings.Contains(err.Error(), "denied by "+module) {
		return fmt.Errorf("pod %s/%s: %v: want denied by %s", ns, p.Name, err, module)
	}
	return nil
}

// An upgrade (or a new CA, a new Service) moves the webhooks to a client
// configuration the API server cannot reach for 5 s: while it is proven on
// the canary, every webhook stays failurePolicy Fail on the client
// configuration that was proven before, so a Pod the module denies is
// denied throughout — no Ignore window.
func TestReRegistrationStaysEnforcedWhileProving(t *testing.T) {
	ctx := t.Context()
	home, apps := env.Namespace(t), env.Namespace(t)
	name := "keep-" + home[len(home)-6:]
	bootstrap(t, name)
	m := newModule(t, name)
	base := strings.TrimSuffix(m.srv.URL(""), "/")
	if err := registration.New(env.Clientset, options(t, name, home, apps, m, base)).Register(ctx); err != nil {
		t.Fatal(err)
	}
	vigiltest.Eventually(t, 5*time.Second, func() error { return denied(t, apps, name) })

	front := newFront(t, strings.TrimPrefix(base, "https://"))
	front.Outage(5 * time.Second)
	up := options(t, name, home, apps, m, "https://"+front.Addr())
	up.Version = "1.0.1"
	done := make(chan error, 1)
	began := time.Now()
	go func() { done <- registration.New(env.Clientset, up).Register(ctx) }()

	proving := func() error {
		cfg, rec := mutating(t, name)
		if rec.State != registration.StateProving || rec.Version != "1.0.1" {
			return fmt.Errorf("record %+v: want 1.0.1 proving", rec)
		}
		for _, w := range cfg.Webhooks {
			switch {
			case spec.IsCanary(w.Name):
				if !strings.HasPrefix(ptr.Deref(w.ClientConfig.URL, ""), "https://"+front.Addr()) {
					return fmt.Errorf("canary at %s: want the new client configuration", ptr.Deref(w.ClientConfig.URL, ""))
				}
			case *w.FailurePolicy != admissionregistrationv1.Fail || !strings.HasPrefix(ptr.Deref(w.ClientConfig.URL, ""), base):
				return fmt.Errorf("webhook %s: failurePolicy %s at %s while proving: want Fail at the proven %s", w.Name, *w.FailurePolicy, ptr.Deref(w.ClientConfig.URL, ""), base)
			}
		}
		return nil
	}
	vigiltest.Eventually(t, 2*time.Second, proving)
	vigiltest.Consistently(t, time.Second, func() error {
		if err := proving(); err != nil {
			return err
		}
		return denied(t, apps, name)
	})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took < 4*time.Second {
		t.Fatalf("enforced on the new client configuration after %s, before it was reachable", took)
	}
	cfg, rec := mutating(t, name)
	if rec.State != registration.StateEnforced || !strings.HasPrefix(ptr.Deref(cfg.Webhooks[0].ClientConfig.URL, ""), "https://"+front.Addr()) {
		t.Fatalf("after the proof: record %+v, webhook at %s: want enforced on the new client configuration", rec, ptr.Deref(cfg.Webhooks[0].ClientConfig.URL, ""))
	}
	if err := denied(t, apps, name); err != nil {
		t.Fatal(err)
	}
}

// A rollback (1.0.1 → 1.0.0): while a replica of 1.0.1 renews its Lease,
// 1.0.0 stands aside even from a drifted configuration; once the Lease
// lapses, 1.0.0 takes the registration over and repairs the drift: a webhook
// an admin set to Ignore with its namespace excluded enforces again, and the
// Pod it let through is denied again.
func TestOlderVersionTakesOverWhenTheNewerStops(t *testing.T) {
	ctx := t.Context()
	home, apps := env.Namespace(t), env.Namespace(t)
	name := "back-" + home[len(home)-6:]
	bootstrap(t, name)
	m := newModule(t, name)
	base := strings.TrimSuffix(m.srv.URL(""), "/")
	const lease = 3 * time.Second
	newOpts := options(t, name, home, apps, m, base)
	newOpts.Version, newOpts.LeaseDuration = "1.0.1", lease
	newer := registration.New(env.Clientset, newOpts)
	if err := newer.RenewLease(ctx); err != nil {
		t.Fatal(err)
	}
	beat, stopBeat := context.WithCancel(ctx)
	beating := make(chan struct{})
	go func() { defer close(beating); newer.Heartbeat(beat, func() error { return nil }) }()
	if err := newer.Register(ctx); err != nil {
		t.Fatal(err)
	}

	// An admin weakens the webhook: Ignore, and the apps namespace excluded.
	cfg, _ := mutating(t, name)
	specified := cfg.Webhooks[0].NamespaceSelector.DeepCopy()
	cfg.Webhooks[0].FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
	cfg.Webhooks[0].NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpNotIn, Values: []string{apps}},
	}}
	if err := env.Client.Update(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	vigiltest.Eventually(t, 5*time.Second, func() error {
		if err := denied(t, apps, name); err == nil {
			return errors.New("still denied after the admin's edit")
		}
		return nil
	})

	oldOpts := options(t, name, home, apps, m, base)
	oldOpts.LeaseDuration = lease
	older := registration.New(env.Clientset, oldOpts)
	// While 1.0.1 renews its Lease, 1.0.0 stands aside.
	vigiltest.Consistently(t, 2*lease, func() error {
		if _, err := older.Sync(ctx); !errors.Is(err, registration.ErrNewer) {
			return fmt.Errorf("1.0.0's Sync while 1.0.1 runs: err = %v, want ErrNewer", err)
		}
		if _, rec := mutating(t, name); rec.Version != "1.0.1" {
			return fmt.Errorf("record %+v: 1.0.0 wrote while 1.0.1 runs", rec)
		}
		return nil
	})

	// 1.0.1's last replica stops; 1.0.0 takes over within the Lease's
	// duration (plus slack for a loaded API server).
	stopBeat()
	<-beating
	stopped := time.Now()
	var tookOver time.Duration
	vigiltest.Eventually(t, lease+5*time.Second, func() error {
		if _, err := older.Sync(ctx); err != nil {
			return err
		}
		tookOver = time.Since(stopped)
		return nil
	})
	t.Logf("1.0.0 took the registration over %s after 1.0.1's last renewal stopped (Lease %s)", tookOver.Round(time.Millisecond), lease)
	cfg, rec := mutating(t, name)
	if rec.Version != "1.0.0" || rec.State != registration.StateEnforced || *cfg.Webhooks[0].FailurePolicy != admissionregistrationv1.Fail ||
		cfg.Webhooks[0].NamespaceSelector.String() != specified.String() {
		t.Fatalf("after the takeover: record %+v, webhook %+v: want 1.0.0's, enforced, as specified", rec, cfg.Webhooks[0])
	}
	vigiltest.Eventually(t, 5*time.Second, func() error { return denied(t, apps, name) })
	if newer, err := older.Newer(ctx); err != nil || newer != "" {
		t.Fatalf("Newer after the takeover: %q, %v; want none", newer, err)
	}
}

// refuseUnlabelled installs a ValidatingAdmissionPolicy, as the labeler's
// configmaps-need-app check is, refusing every ConfigMap of ns without an
// app label: the canary among them.
func refuseUnlabelled(t *testing.T, ns string) {
	t.Helper()
	name := "need-app-" + ns[len(ns)-6:]
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: `has(object.metadata.labels) && 'app' in object.metadata.labels`, Message: "the ConfigMap has no app label"}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: name, ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}},
		},
	}
	for _, o := range []client.Object{policy, binding} {
		if err := env.Client.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
	vigiltest.Eventually(t, 10*time.Second, func() error {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"}}
		if err := env.Client.Create(t.Context(), cm, client.DryRunAll); err == nil || !strings.Contains(err.Error(), "no app label") {
			return fmt.Errorf("a ConfigMap without an app label: %v; want refused by the policy", err)
		}
		return nil
	})
}

// A first install whose canary another policy refuses while the module is
// not reachable yet: the registration says it is stuck — to OnStuck and on
// the Record — naming the refusal, not RBAC; once a replica is reachable its
// canary counts despite the refusal, it enforces, and the problem clears.
func TestStuckRegistrationIsReported(t *testing.T) {
	ctx := t.Context()
	home, apps := env.Namespace(t), env.Namespace(t)
	name := "stuck-" + home[len(home)-6:]
	bootstrap(t, name)
	refuseUnlabelled(t, home)
	m := newModule(t, name)
	front := newFront(t, strings.TrimPrefix(strings.TrimSuffix(m.srv.URL(""), "/"), "https://"))
	front.Outage(6 * time.Second)
	r := registration.New(env.Clientset, options(t, name, home, apps, m, "https://"+front.Addr()))
	told := make(chan error, 4)
	r.OnStuck(func(problem error) { told <- problem })
	done := make(chan error, 1)
	go func() { done <- r.Register(ctx) }()

	select {
	case problem := <-told:
		if !errors.Is(problem, registration.ErrCanaryRefused) || !strings.Contains(problem.Error(), "no app label") || strings.Contains(problem.Error(), "the module needs") {
			t.Fatalf("stuck: %v; want the refusal named (ErrCanaryRefused, the policy's message), not RBAC", problem)
		}
	case err := <-done:
		t.Fatalf("registered (%v) while the module was unreachable", err)
	case <-time.After(5 * time.Second):
		t.Fatal("no stuck report within 5s of a refused canary")
	}
	if _, rec := mutating(t, name); rec.State != registration.StateProbing || !strings.Contains(rec.Problem, "no app label") || rec.ProblemSince == "" {
		t.Fatalf("record %+v: want probing, with the refusal as its problem", rec)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, rec := mutating(t, name); rec.State != registration.StateEnforced || rec.Problem != "" {
		t.Fatalf("record %+v: want enforced, the problem cleared", rec)
	}
	if problem := <-told; problem != nil {
		t.Fatalf("after the canary reached the module: told %v, want nil", problem)
	}
}
