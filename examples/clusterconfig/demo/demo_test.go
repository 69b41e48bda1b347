package main

import (
	"context"
	"os"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/internal/dev"
	"github.com/vigilkit/vigil/store/v1alpha1"
	"github.com/vigilkit/vigil/vigiltest"
)

var env *vigiltest.Env

func TestMain(m *testing.M) {
	os.Exit(vigiltest.Run(m, vigiltest.Options{}, &env))
}

// The demo's scenario, on the test's API server: each step did what the
// narration says, in the order it says.
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
	// 4. Webhooks were enforced after the last phase, and are gone after the
	// demo (Ctrl-C removes them).
	if rep.Enforced.Before(rep.Applied) {
		t.Errorf("webhooks enforced at %s, before the objects were applied at %s", rep.Enforced, rep.Applied)
	}
	for _, obj := range []client.Object{&admissionregistrationv1.ValidatingWebhookConfiguration{}, &admissionregistrationv1.MutatingWebhookConfiguration{}} {
		if err := env.Client.Get(context.Background(), client.ObjectKey{Name: "uds-core"}, obj); !apierrors.IsNotFound(err) {
			t.Errorf("%T uds-core after the demo: %v, want it removed", obj, err)
		}
	}
	// 5. The label carries the ClusterConfig's cluster name.
	if rep.PodLabel != "demo-cluster" {
		t.Errorf("pod label %s = %q, want demo-cluster", label, rep.PodLabel)
	}
	// 6. The denial names the policy and how to get past it.
	for _, w := range []string{`denied the request`, "DisallowPrivileged", `container "main" is privileged`, "add an Exemption"} {
		if !strings.Contains(rep.Denial, w) {
			t.Errorf("denial %q lacks %q", rep.Denial, w)
		}
	}
	// 7. Admitted under the new Exemption, which the module read live.
	if rep.Exempted == nil || !rep.Exempted.Allowed || len(rep.Exempted.Warnings) != 1 ||
		!strings.Contains(rep.Exempted.Warnings[0], "uds-policy-exemptions/debug-tools") {
		t.Errorf("exempted admission: %+v, want allowed with a warning naming the Exemption", rep.Exempted)
	}
	// 8. The Reconcile wrote the status.
	if rep.Status["phase"] != "Ready" || rep.Status["clusterName"] != "demo-cluster" {
		t.Errorf("ClusterConfig status %v, want phase Ready for demo-cluster", rep.Status)
	}
	// Phase 1 merged the ClusterConfig over the defaults Secret, which vigil
	// dev materialised where the module looks for its mount: the
	// ClusterConfig leaves adminDomain out, the Secret's defaults.yaml sets it.
	st := &v1alpha1.Store{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: "uds-system", Name: "uds-core"}, st); err != nil {
		t.Fatalf("the Store phase 1 wrote: %v", err)
	}
	if got := st.Data["initialClusterConfig"]; !strings.Contains(got, `"clusterName":"demo-cluster"`) || !strings.Contains(got, `"adminDomain":"admin.uds.dev"`) {
		t.Errorf("Store initialClusterConfig = %s, want the ClusterConfig merged over the mounted defaults", got)
	}
	// The narration carries the timeline.
	for _, w := range []string{"gate-phase-0 started", "waits for CustomResourceDefinition.apiextensions.k8s.io clusterconfigs.uds.dev: established",
		"webhooks enforced with failurePolicy Fail", "CREATE Pod demo/web (mutate): admitted", "(validate): denied", "summary: 8 steps passed"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("output lacks %q", w)
		}
	}
	t.Logf("demo took %s", rep.Took)
}
