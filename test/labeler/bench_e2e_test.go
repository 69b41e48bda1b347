package labeler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/internal/testsupport/bench"
	"github.com/vigilkit/vigil/vigiltest"
)

// BenchmarkAdmissionE2E is the cost a create pays for the module, as the API
// server sees it: ConfigMaps created one after another through the real API
// server with nothing registered; then with the labeler as it ships, whose
// mutation the API server calls over TLS and whose check it evaluates itself
// (Require); then with the labeler's checks served by its validating webhook
// instead (two calls per create); then with nothing again. It prints the
// difference between the latencies with the module and those without, at p50
// and p99, beside the floor server registered as the same webhooks.
func BenchmarkAdmissionE2E(b *testing.B) {
	ctx := b.Context()
	ns := env.Namespace(b)
	const n = 1000
	create := func(phase string, count int, labelled bool) []time.Duration {
		lat := make([]time.Duration, 0, count)
		for i := range count {
			cm := &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%d", phase, i), Labels: map[string]string{"app": "bench"}},
				Data:       map[string]string{"config.yaml": "key: value\n"},
			}
			t0 := time.Now()
			if err := env.Client.Create(ctx, cm); err != nil {
				b.Fatalf("%s: create %s: %v", phase, cm.Name, err)
			}
			lat = append(lat, time.Since(t0))
			if labelled && cm.Labels["vigil.dev/labeled"] != "true" {
				b.Fatalf("%s: created %s without the labeler's label: the webhook was not called", phase, cm.Name)
			}
		}
		return lat
	}
	// probe is a dry-run create: whether it comes back labelled, and whether
	// one without an app label is refused.
	probe := func() (labelled, refused bool, err error) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe", Labels: map[string]string{"app": "bench"}}}
		if err := env.Client.Create(ctx, cm, client.DryRunAll); err != nil {
			return false, false, err
		}
		bare := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"}}
		err = env.Client.Create(ctx, bare, client.DryRunAll)
		return cm.Labels["vigil.dev/labeled"] == "true", err != nil && strings.Contains(err.Error(), "has no app label"), nil
	}
	create("warm", 200, false)
	none := create("none-before", n, false)

	b.Cleanup(func() { _ = unregister(context.Background()) })
	var l *labeler
	// run measures the labeler with its checks as checks says, registered
	// by itself (--bootstrap creates its policies too), then removes it all.
	run := func(checks string) []time.Duration {
		l = startLabelerWith(b, []string{"--bootstrap", "--webhook-url", "https://{addr}"}, "LABELER_CHECKS="+checks)
		// Until the API server calls the webhooks and enforces the checks.
		vigiltest.Eventually(b, 60*time.Second, func() error {
			labelled, refused, err := probe()
			switch {
			case err != nil:
				return err
			case !labelled:
				return errors.New("a dry-run create came back without the labeler's label: the webhook is not called yet")
			case !refused:
				return errors.New("a dry-run create without an app label was admitted: the check is not in force yet")
			}
			return nil
		})
		vigiltest.Eventually(b, 30*time.Second, func() error {
			if !strings.Contains(l.logs.String(), "webhooks-enforced") {
				return errors.New("the labeler has not enforced its webhooks yet")
			}
			return nil
		})
		readWebhooks(ctx, checks)
		create(checks+"-warm", 200, true)
		lat := create(checks, n, true)
		_ = l.cmd.Process.Kill()
		_, _ = l.cmd.Process.Wait()
		if err := unregister(ctx); err != nil {
			b.Fatal(err)
		}
		// Until the API server neither calls nor enforces them.
		vigiltest.Eventually(b, 60*time.Second, func() error {
			labelled, refused, err := probe()
			if err == nil && (labelled || refused) {
				err = errors.New("a dry-run create is still labelled, or one without an app label still refused")
			}
			return err
		})
		slices.Sort(lat)
		return lat
	}
	with := run("require")
	withWebhook := run("webhook")
	none = append(none, create("none-after", n, false)...)

	// The floor: the floor server (serveFloor) registered as one mutating
	// and one validating webhook for the same creates — what the API
	// server's own calling of webhooks costs.
	fl := startFloor(b, l)
	b.Cleanup(func() { _ = unregisterFloor(context.Background(), ns) })
	floorRun := func(phase string, validating, policy bool) []time.Duration {
		if err := registerFloor(ctx, fl, l, ns, validating, policy); err != nil {
			b.Fatal(err)
		}
		vigiltest.Eventually(b, 60*time.Second, func() error {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe", Labels: map[string]string{"app": "bench"}}}
			if err := env.Client.Create(ctx, cm, client.DryRunAll); err != nil {
				return err
			}
			if cm.Labels["vigil.dev/labeled"] != "true" {
				return errors.New("a dry-run create came back without the floor's label: the floor is not called yet")
			}
			if policy {
				// Until the API server enforces the policy too.
				bare := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"}}
				if err := env.Client.Create(ctx, bare, client.DryRunAll); err == nil {
					return errors.New("a dry-run create without an app label was admitted: the policy is not enforced yet")
				}
			}
			return nil
		})
		create(phase+"-warm", 200, true)
		lat := create(phase, n, true)
		if err := unregisterFloor(ctx, ns); err != nil {
			b.Fatal(err)
		}
		slices.Sort(lat)
		return lat
	}
	conns := fl.Connections(l.newClient(false))
	floorLat := floorRun("floor", true, false)
	conns = fl.Connections(l.newClient(false)) - conns
	// Fewer calls: the floor as the mutating webhook alone, and beside it
	// the labeler's check as a ValidatingAdmissionPolicy the API server
	// evaluates itself.
	floorOne := floorRun("floor-mutating", false, false)
	floorPolicy := floorRun("floor-mutating-policy", false, true)

	slices.Sort(none)
	fmt.Printf("admission-e2e: create_p50_overhead=%.2fms create_p99_overhead=%.2fms create_p50_overhead_webhook_checks=%.2fms create_p99_overhead_webhook_checks=%.2fms floor_create_p50_overhead=%.2fms floor_create_p99_overhead=%.2fms (creates one at a time: p50 %.2fms p99 %.2fms with the labeler as it ships, n=%d; p50 %.2fms p99 %.2fms with its checks served by its webhook, n=%d; p50 %.2fms p99 %.2fms with the floor server as one mutating and one validating webhook, n=%d; p50 %.2fms p99 %.2fms with none, n=%d, before and after)\n",
		ms(pct(with, 50)-pct(none, 50)), ms(pct(with, 99)-pct(none, 99)), ms(pct(withWebhook, 50)-pct(none, 50)), ms(pct(withWebhook, 99)-pct(none, 99)),
		ms(pct(floorLat, 50)-pct(none, 50)), ms(pct(floorLat, 99)-pct(none, 99)),
		ms(pct(with, 50)), ms(pct(with, 99)), len(with), ms(pct(withWebhook, 50)), ms(pct(withWebhook, 99)), len(withWebhook),
		ms(pct(floorLat, 50)), ms(pct(floorLat, 99)), len(floorLat), ms(pct(none, 50)), ms(pct(none, 99)), len(none))
	fmt.Printf("admission-e2e-floor: one_mutating_p50_overhead=%.2fms one_mutating_and_policy_p50_overhead=%.2fms mutating_and_validating_p50_overhead=%.2fms (the floor server as the mutating webhook alone; as that with the labeler's check as a ValidatingAdmissionPolicy; as both webhooks; n=%d each)\n",
		ms(pct(floorOne, 50)-pct(none, 50)), ms(pct(floorPolicy, 50)-pct(none, 50)), ms(pct(floorLat, 50)-pct(none, 50)), n)
	fmt.Printf("admission-e2e: what the labeler registered: %s; the floor server accepted %d connections for the %d creates' %d calls (the API server keeps them alive)\n", strings.Join(registered, "; "), conns, n, 2*n)
}

// registerFloor registers the floor server as a mutating webhook for creates
// of ConfigMaps in ns, and as a validating one (validating), and the
// labeler's check — an app label — as a ValidatingAdmissionPolicy (policy).
func registerFloor(ctx context.Context, fl *bench.Floor, l *labeler, ns string, validating, policy bool) error {
	rules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
	}}
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}
	none := admissionregistrationv1.SideEffectClassNone
	fail := admissionregistrationv1.Fail
	cc := func(path string) admissionregistrationv1.WebhookClientConfig {
		url := fl.Base + path
		return admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: l.serving.CABundle}
	}
	objs := []client.Object{&admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-floor"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "mutate.floor.bench", ClientConfig: cc("/mutate"), Rules: rules, NamespaceSelector: selector,
			SideEffects: &none, FailurePolicy: &fail, AdmissionReviewVersions: []string{"v1"},
		}},
	}}
	if validating {
		objs = append(objs, &admissionregistrationv1.ValidatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: "bench-floor"},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{
				Name: "validate.floor.bench", ClientConfig: cc("/validate"), Rules: rules, NamespaceSelector: selector,
				SideEffects: &none, FailurePolicy: &fail, AdmissionReviewVersions: []string{"v1"},
			}},
		})
	}
	if policy {
		objs = append(objs, &admissionregistrationv1.ValidatingAdmissionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "bench-floor"},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
				FailurePolicy: &fail,
				MatchConstraints: &admissionregistrationv1.MatchResources{
					NamespaceSelector: selector,
					ResourceRules:     []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: rules[0]}},
				},
				Validations: []admissionregistrationv1.Validation{{
					Expression: `has(object.metadata.labels) && 'app' in object.metadata.labels`,
					Message:    "a ConfigMap needs an app label",
				}},
			},
		}, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "bench-floor"},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
				PolicyName: "bench-floor", ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			},
		})
	}
	for _, o := range objs {
		if err := env.Client.Create(ctx, o); err != nil {
			return err
		}
	}
	return nil
}

// unregisterFloor removes what registerFloor registered, and waits until
// the API server neither calls the floor nor enforces the policy in ns.
func unregisterFloor(ctx context.Context, ns string) error {
	for _, obj := range []client.Object{
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "bench-floor"}},
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "bench-floor"}},
		&admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "bench-floor"}},
		&admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "bench-floor"}},
	} {
		if err := env.Client.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	deadline := time.Now().Add(time.Minute)
	for {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"}}
		err := env.Client.Create(ctx, cm, client.DryRunAll)
		if err == nil && cm.Labels["vigil.dev/labeled"] == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the floor is still called a minute after its removal (last: %v)", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// registered names, for each way the labeler ran, its webhooks and
// policies, read while they are registered.
var registered []string

// readWebhooks records what the labeler registered, its checks as checks.
func readWebhooks(ctx context.Context, checks string) {
	mw := &admissionregistrationv1.MutatingWebhookConfiguration{}
	vw := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if env.Client.Get(ctx, client.ObjectKey{Name: "labeler"}, mw) != nil || env.Client.Get(ctx, client.ObjectKey{Name: "labeler"}, vw) != nil {
		return
	}
	var names []string
	for _, w := range mw.Webhooks {
		names = append(names, "mutating "+w.Name)
	}
	for _, w := range vw.Webhooks {
		names = append(names, "validating "+w.Name)
	}
	policies := &admissionregistrationv1.ValidatingAdmissionPolicyList{}
	if env.Client.List(ctx, policies, client.MatchingLabels{"app.kubernetes.io/name": "labeler"}) == nil {
		for _, p := range policies.Items {
			names = append(names, "ValidatingAdmissionPolicy "+p.Name)
		}
	}
	registered = append(registered, "checks "+checks+": "+strings.Join(names, ", "))
}

// unregister deletes the labeler's webhook configurations and policies.
func unregister(ctx context.Context) error {
	objs := []client.Object{
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "labeler"}},
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "labeler"}},
	}
	for _, check := range []string{"configmaps-need-app", "pods-need-app"} {
		name := "labeler-labels-" + check
		objs = append(objs,
			&admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name}},
			&admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}})
	}
	for _, obj := range objs {
		if err := env.Client.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}
