package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/internal/commands/dev"
	"github.com/vigilkit/vigil/store/v1alpha1"
	"github.com/vigilkit/vigil/vigiltest"
)

var env *vigiltest.Env

func TestMain(m *testing.M) {
	os.Exit(vigiltest.Run(m, vigiltest.Options{}, &env))
}

// The demo's scenario, on the test's API server, with the stand-ins for
// UDS Core's CRDs as on a machine without UDS Core's files: each step did
// what the narration says, in the order it says.
func TestDemoScenario(t *testing.T) {
	var out vigiltest.Buffer
	rep, err := runDemo(t.Context(), options{kubeconfig: env.KubeConfigFile(t), dir: exampleDir(), out: &out, progress: &out})
	t.Logf("demo output:\n%s", out.String())
	if err != nil {
		t.Fatalf("demo: %v", err)
	}
	if len(rep.Steps) != 8 {
		t.Fatalf("%d steps passed, want 8", len(rep.Steps))
	}
	if !strings.Contains(rep.CRDs, "stand-ins") {
		t.Errorf("CRDs applied: %s, want the stand-ins", rep.CRDs)
	}

	// 1. With nothing installed, the first gate waited and said what it saw.
	if len(rep.Waiting) == 0 || rep.Waiting[0].Seen != "not found" {
		t.Errorf("the phase 0 gate's first report: %+v, want it to have seen nothing (not found)", rep.Waiting)
	}
	// 2-3. No phase finished before the objects were applied; then all three
	// did, in order, each starting after the previous one was done.
	var order []string
	for _, e := range rep.Events {
		switch e.Kind {
		case dev.PhaseStarted, dev.PhaseDone:
			order = append(order, string(e.Kind)+e.Role[len("phase "):])
		case dev.WebhooksRegistered, dev.WebhooksEnforced:
			order = append(order, string(e.Kind))
		}
		if e.Kind == dev.PhaseDone && e.Phase == 0 && e.At.Before(rep.Waiting[0].At) {
			t.Errorf("phase 0 was done before its gate reported waiting")
		}
	}
	want := "phase-started0 phase-done0 phase-started1 phase-done1 phase-started2 phase-done2 webhooks-registered webhooks-enforced"
	if got := strings.Join(order, " "); got != want {
		t.Errorf("order of events:\n got %s\nwant %s", got, want)
	}
	// 4. Webhooks were enforced after the last phase: Fail, but Ignore in
	// istio-system (UDS Core's ADR 0004); they are gone after the demo
	// (Ctrl-C removes them).
	if rep.Enforced.Before(rep.Applied) {
		t.Errorf("webhooks enforced at %s, before the objects were applied at %s", rep.Enforced, rep.Applied)
	}
	policies := map[admissionregistrationv1.FailurePolicyType]int{}
	ignoredIn := ""
	for _, w := range rep.Webhooks {
		policies[*w.FailurePolicy]++
		if *w.FailurePolicy == admissionregistrationv1.Ignore && w.NamespaceSelector != nil {
			for _, e := range w.NamespaceSelector.MatchExpressions {
				if e.Operator == metav1.LabelSelectorOpIn {
					ignoredIn += strings.Join(e.Values, ",")
				}
			}
		}
	}
	if policies[admissionregistrationv1.Fail] == 0 || policies[admissionregistrationv1.Ignore] == 0 || ignoredIn != "istio-system" {
		t.Errorf("webhooks: %v failure policies, Ignore in %q; want Fail ones and Ignore ones limited to istio-system", policies, ignoredIn)
	}
	for _, obj := range []client.Object{&admissionregistrationv1.ValidatingWebhookConfiguration{}, &admissionregistrationv1.MutatingWebhookConfiguration{}} {
		if err := env.Client.Get(context.Background(), client.ObjectKey{Name: "uds-core"}, obj); !apierrors.IsNotFound(err) {
			t.Errorf("%T uds-core after the demo: %v, want it removed", obj, err)
		}
	}
	// 5. UDS Core's mutations set its safe defaults and say which ran.
	if sc := rep.SecurityContext; sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
		t.Errorf("web's securityContext %+v, want allowPrivilegeEscalation false and capabilities dropped", sc)
	}
	for _, p := range []string{"disallow-privileged", "drop-all-capabilities"} {
		if !strings.Contains(rep.Mutated, p) {
			t.Errorf("mutated annotation %s lacks %s", rep.Mutated, p)
		}
	}
	// 6. The denial is UDS Core's, word for word.
	for _, w := range []string{`denied the request`, "Privilege escalation is disallowed. Authorized: [allowPrivilegeEscalation = false | privileged = false]"} {
		if !strings.Contains(rep.Denial, w) {
			t.Errorf("denial %q lacks %q", rep.Denial, w)
		}
	}
	// 7. Admitted under the new Exemption, which the module read live.
	if rep.Exempted == nil || rep.Exempted.Annotations[exemptedAnnotation] != "exempted" {
		t.Errorf("exempted pod: %+v, want it admitted and marked exempted", rep.Exempted)
	}
	// 8. The watcher wrote the status.
	if rep.Status["phase"] != "Ready" {
		t.Errorf("ClusterConfig status %v, want phase Ready", rep.Status)
	}
	// Phase 1 merged the ClusterConfig over the operator-config Secret,
	// which vigil dev materialised where the module looks for its mount.
	st := &v1alpha1.Store{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: "pepr-system", Name: "uds-core"}, st); err != nil {
		t.Fatalf("the Store phase 1 wrote: %v", err)
	}
	for _, w := range []string{`"domain":"uds.dev"`, `"fromClusterConfig":true`, `"keycloakClientMode":"AUTO"`} {
		if !strings.Contains(fmt.Sprint(st.Data), w) {
			t.Errorf("Store data %v lacks %s: want the ClusterConfig merged over the Secret", st.Data, w)
		}
	}
	// The narration carries the timeline.
	for _, w := range []string{"gate-phase-0 started", "waits for CustomResourceDefinition.apiextensions.k8s.io clusterconfig.uds.dev: established",
		"webhooks enforced with failurePolicy", "CREATE Pod demo/web (mutate): admitted", "(validate): denied", "summary: 8 steps passed"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("output lacks %q", w)
		}
	}
	t.Logf("demo took %s", rep.Took)
}
