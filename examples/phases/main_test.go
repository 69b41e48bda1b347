package main

import (
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

// The module's phases run as separate processes, one after the other, as its
// init containers would: each holds until its gates are done, the gates of a
// phase wait at once, and what they found reaches the handoff folder and the
// Store.
func TestPhasesRunInOrderAsInitContainers(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	bin := vigiltest.BuildModule(t, ".")
	ns := env.Namespace(t)
	kcPath := env.KubeConfigFile(t)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "phases-0"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "module", Image: "phases"}}},
	}
	if err := env.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	handoff := filepath.Join(dir, "handoff")
	readyFile := filepath.Join(dir, "ready")
	defaultsFile := filepath.Join(dir, "defaults.json")
	if err := os.WriteFile(defaultsFile, []byte(`{"mode":"default"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	envv := []string{
		"KUBECONFIG=" + kcPath, "PHASES_NAMESPACE=" + ns, "VIGIL_HANDOFF_DIR=" + handoff,
		"PHASES_READY_FILE=" + readyFile, "PHASES_DEFAULTS_FILE=" + defaultsFile,
		"POD_NAME=" + pod.Name, "POD_NAMESPACE=" + ns, "POD_UID=" + string(pod.UID),
	}
	gateArgs := func(phase string) []string {
		return []string{"gate", "--phase", phase, "--progress-interval", "200ms"}
	}

	plan, err := exec.Command(bin, "plan").CombinedOutput()
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, plan)
	}
	for _, want := range []string{"phase 0", "init container gate-phase-0: gate --phase 0", "customresourcedefinition-widgets.example.vigil.dev", "phase 2", "ready-file", "fallback on timeout", "gate-phase-1\n  gate-phase-2"} {
		if !strings.Contains(string(plan), want) {
			t.Errorf("plan lacks %q:\n%s", want, plan)
		}
	}

	// Phase 0: both gates wait at once; the phase ends only when both are done.
	p0 := vigiltest.StartProcess(t, envv, bin, gateArgs("0")...)
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
	p1 := vigiltest.StartProcess(t, envv, bin, gateArgs("1")...)
	w := &unstructured.Unstructured{}
	w.SetAPIVersion("example.vigil.dev/v1")
	w.SetKind("Widget")
	w.SetNamespace(ns)
	w.SetName("first")
	_ = unstructured.SetNestedField(w.Object, int64(1), "spec", "size")
	if err := env.Client.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
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
	p2 := vigiltest.StartProcess(t, envv, bin, gateArgs("2")...)
	p2.Running(t, 1500*time.Millisecond)
	if err := os.WriteFile(readyFile, []byte("ready\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p2.WaitOK(t, 20*time.Second)

	for name, want := range map[string]string{
		"customresourcedefinition-widgets.example.vigil.dev": `"done"`,
		"configmap-settings":  `"done"`,
		"widget-first":        `"size":3`,
		"ready-file":          `"result":"ready\n"`,
		"configmap-overrides": `"state":"fallback"`,
	} {
		raw, err := os.ReadFile(filepath.Join(handoff, "gate-"+name+".json"))
		if err != nil {
			t.Fatalf("handoff of %s: %v", name, err)
		}
		if !strings.Contains(string(raw), want) {
			t.Errorf("handoff of %s = %s, want it to contain %s", name, raw, want)
		}
	}
	var overrides struct {
		Result corev1.ConfigMap `json:"result"`
	}
	raw, _ := os.ReadFile(filepath.Join(handoff, "gate-configmap-overrides.json"))
	if err := json.Unmarshal(raw, &overrides); err != nil || overrides.Result.Data["mode"] != "default" {
		t.Fatalf("overrides handoff %s: want the defaults' data", raw)
	}

	// Events on the pod tell the story of its gates.
	evs := &corev1.EventList{}
	if err := env.Client.List(ctx, evs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	reasons := map[string]int{}
	for _, e := range evs.Items {
		if e.InvolvedObject.Name == pod.Name {
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
	began := time.Now()
	again := vigiltest.StartProcess(t, envv, bin, gateArgs("0")...)
	again.WaitOK(t, 10*time.Second)
	t.Logf("rerun of satisfied phase 0 took %s", time.Since(began))

}
