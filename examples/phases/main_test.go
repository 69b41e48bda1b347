package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/store/v1alpha1"
	"github.com/vigilkit/vigil/vigiltest"
)

var env *vigiltest.Env

func TestMain(m *testing.M) {
	os.Exit(vigiltest.Run(m, vigiltest.Options{}, &env))
}

// The module's phases run as its manifests' init containers, one after the
// other, each as the module's ServiceAccount: each holds until its gates are
// done, the gates of a phase wait at once, and what they found reaches the
// handoff folder and the Store. The files phase 2 reads are a platform's
// overlay (PHASES_READY_FILE, PHASES_DEFAULTS_FILE).
func TestPhasesRunInOrderAsInitContainers(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	readyFile := filepath.Join(dir, "ready")
	defaultsFile := filepath.Join(dir, "defaults.json")
	if err := os.WriteFile(defaultsFile, []byte(`{"mode":"default"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	m := env.InstallModule(t, vigiltest.ModuleOptions{
		Env:  []string{"PHASES_READY_FILE=" + readyFile, "PHASES_DEFAULTS_FILE=" + defaultsFile},
		Args: map[string][]string{"gate-phase-0": {"--progress-interval", "200ms"}, "gate-phase-1": {"--progress-interval", "200ms"}, "gate-phase-2": {"--progress-interval", "200ms"}},
	})
	ns := m.Namespace

	plan, err := exec.Command(m.Binary, "plan").CombinedOutput()
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, plan)
	}
	for _, want := range []string{"phase 0", "init container gate-phase-0: gate --phase 0", "customresourcedefinition-widgets.example.vigil.dev", "phase 2", "ready-file", "fallback on timeout", "gate-phase-1\n  gate-phase-2"} {
		if !strings.Contains(string(plan), want) {
			t.Errorf("plan lacks %q:\n%s", want, plan)
		}
	}
	if m.Phases() != 3 {
		t.Fatalf("%d init containers, want 3", m.Phases())
	}

	// Phase 0: both gates wait at once; the phase ends only when both are done.
	p0 := m.StartPhase(0)
	p0.Running(t, time.Second)
	if err := env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings"}}); err != nil {
		t.Fatal(err)
	}
	p0.Running(t, 500*time.Millisecond)
	log0 := p0.Output.String()
	for _, g := range []string{"gate=customresourcedefinition-widgets.example.vigil.dev", "gate=configmap-settings"} {
		if !strings.Contains(log0, g) {
			t.Fatalf("phase 0 log lacks %s, so its gates did not wait at once:\n%s", g, log0)
		}
	}
	crd, err := os.ReadFile("widgets-crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := env.InstallCRDYAML(crd); err != nil {
		t.Fatal(err)
	}
	p0.WaitOK(t, 20*time.Second)

	// Phase 1 waits for the Widget to reach size 3, then stores it.
	p1 := m.StartPhase(1)
	w := &unstructured.Unstructured{}
	w.SetAPIVersion("example.vigil.dev/v1")
	w.SetKind("Widget")
	w.SetNamespace(ns)
	w.SetName("first")
	_ = unstructured.SetNestedField(w.Object, int64(1), "spec", "size")
	if err := env.Client.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), w) })
	p1.Running(t, time.Second)
	if !strings.Contains(p1.Output.String(), "no such key") && !strings.Contains(p1.Output.String(), "gate waiting") {
		t.Fatalf("phase 1 log says nothing of what it waits for:\n%s", p1.Output)
	}
	_ = unstructured.SetNestedField(w.Object, int64(3), "spec", "size")
	if err := env.Client.Update(ctx, w); err != nil {
		t.Fatal(err)
	}
	p1.WaitOK(t, 20*time.Second)
	st := &v1alpha1.Store{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "phases"}, st); err != nil {
		t.Fatalf("the Store phase 1 wrote: %v", err)
	}
	if st.Data["firstWidget"] != `{"size":3}` {
		t.Fatalf("Store data %v, want firstWidget = {\"size\":3}", st.Data)
	}

	// Phase 2: the sampled file becomes ready; the overrides never appear, so
	// the defaults from the file are used.
	p2 := m.StartPhase(2)
	p2.Running(t, 1500*time.Millisecond)
	if err := os.WriteFile(readyFile, []byte("ready\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p2.WaitOK(t, 20*time.Second)

	handoff := m.Handoff()
	for name, want := range map[string]string{
		"customresourcedefinition-widgets.example.vigil.dev": `"done"`,
		"configmap-settings":  `"done"`,
		"widget-first":        `"size":3`,
		"ready-file":          `"result":"ready\n"`,
		"configmap-overrides": `"state":"fallback"`,
	} {
		raw, ok := handoff["gate-"+name+".json"]
		if !ok {
			t.Fatalf("no handoff of %s (handed off: %v)", name, keys(handoff))
		}
		if !strings.Contains(raw, want) {
			t.Errorf("handoff of %s = %s, want it to contain %s", name, raw, want)
		}
	}
	var overrides struct {
		Result corev1.ConfigMap `json:"result"`
	}
	raw := handoff["gate-configmap-overrides.json"]
	if err := json.Unmarshal([]byte(raw), &overrides); err != nil || overrides.Result.Data["mode"] != "default" {
		t.Fatalf("overrides handoff %s: want the defaults' data", raw)
	}

	// Events on the pod tell the story of its gates.
	evs := &corev1.EventList{}
	if err := env.Client.List(ctx, evs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	reasons := map[string]int{}
	for _, e := range evs.Items {
		if e.InvolvedObject.Name == m.AdmissionPod().Name {
			reasons[e.Reason]++
		}
	}
	for _, r := range []string{"GateWaiting", "GateSeen", "GateDone", "GateTimedOut"} {
		if reasons[r] == 0 {
			t.Errorf("no %s Event on the pod (events: %v)", r, reasons)
		}
	}
	if reasons["GateDone"] != 4 {
		t.Errorf("%d GateDone events, want one per gate that was done (4)", reasons["GateDone"])
	}

	// A restarted pod reruns a phase idempotently: satisfied at once.
	admission, err := m.Manifests.Deployment("admission")
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	again := env.NewPod(t, ns, admission.Spec.Template, vigiltest.PodOptions{Binary: m.Binary})
	again.RunInit(10 * time.Second)
	t.Logf("rerun of satisfied phase 0 took %s", time.Since(began))
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
