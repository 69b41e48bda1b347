package vigiltest_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vigilkit/vigil/vigiltest"
	"github.com/vigilkit/vigil/vigiltest/node"
)

// kitRun is what one way of running the kit's module showed: what its
// phases did, whether its roles became ready and what it decided.
type kitRun struct {
	Phases    []string // per phase: its container and each gate's events, in order
	Handoff   []string // the names of the files the phases handed off
	Ready     []string // per role: its readiness as its probe port answers it
	Decisions []string // per request: admitted (with the patch) or denied (with the message)
}

// The same module — the kit's, from README's "Test your own module" — run
// both ways on one node's control plane: first by the runner, then from its
// own image by the node's kubelet. The two take the same phases with the
// same gate events, hand off the same files, become ready the same way and
// make the same decisions on the same requests.
func TestTheRunnerAndANodeAgree(t *testing.T) {
	if os.Getenv("VIGIL_E2E") == "" {
		t.Skip("a real node: set VIGIL_E2E=1 (make e2e) to run it")
	}
	nodeEnv, err := vigiltest.Start(vigiltest.Options{Node: node.Start, Build: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := nodeEnv.Stop(); err != nil {
			t.Errorf("stop the node: %v", err)
		}
	})
	if err := nodeEnv.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kitApps}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	var runner, onNode kitRun
	for _, way := range []struct {
		name string
		node bool
		out  *kitRun
	}{{"runner", false, &runner}, {"node", true, &onNode}} {
		if !t.Run(way.name, func(t *testing.T) { *way.out = runKit(t, nodeEnv, way.node) }) {
			t.FailNow()
		}
	}
	for _, part := range []struct {
		what         string
		runner, node []string
	}{
		{"phases", runner.Phases, onNode.Phases},
		{"handoff", runner.Handoff, onNode.Handoff},
		{"readiness", runner.Ready, onNode.Ready},
		{"decisions", runner.Decisions, onNode.Decisions},
	} {
		t.Logf("%s: runner %q, node %q", part.what, part.runner, part.node)
		if len(part.runner) == 0 {
			t.Errorf("%s: the runner showed none: the comparison checks nothing", part.what)
		}
		if !slices.Equal(part.runner, part.node) {
			t.Errorf("%s differ:\n  runner: %q\n  node:   %q", part.what, part.runner, part.node)
		}
	}
}

var gateEvent = regexp.MustCompile(`gate=(\S+) event=(gate-[a-z-]+)`)

// runKit installs the kit's module, one way or the other, and drives it as
// TestModuleKitAsTheREADMEShowsIt does, recording what it showed.
func runKit(t *testing.T, e *vigiltest.Env, onNode bool) kitRun {
	var run kitRun
	m := e.InstallModule(t, vigiltest.ModuleOptions{Dir: "./testdata/kit", OnNode: onNode})
	if m.Phases() != 1 {
		t.Fatalf("the kit has %d phases, want 1", m.Phases())
	}
	gate := m.StartPhase(0)
	gate.WaitOutput(t, "gate waiting", 90*time.Second)
	settings := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: m.Name + "-config"}}
	if err := e.Client.Create(t.Context(), settings); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Client.Delete(context.Background(), settings) })
	gate.WaitOK(t, 60*time.Second)
	var events []string
	for _, match := range gateEvent.FindAllStringSubmatch(gate.Output.String(), -1) {
		if ev := match[1] + " " + match[2]; !slices.Contains(events, ev) {
			events = append(events, ev)
		}
	}
	run.Phases = append(run.Phases, fmt.Sprintf("gate-phase-0: %s", strings.Join(events, ", ")))
	for name := range m.Handoff() {
		run.Handoff = append(run.Handoff, name)
	}
	slices.Sort(run.Handoff)

	admission := m.StartAdmission(2 * time.Minute)
	run.Ready = append(run.Ready, "admission "+readyz(t, admission, "https"))

	suffix := randSuffix(t)
	labelled := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: kitApps, Name: "ok-" + suffix, Labels: map[string]string{"app": "shop"}}}
	run.Decisions = append(run.Decisions, "labelled: "+admitted(vigiltest.Mutated(t, e.Client, labelled)))
	t.Cleanup(func() { _ = e.Client.Delete(context.Background(), labelled) })
	msg := vigiltest.Denied(t, e.Client, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: kitApps, Name: "bad-" + suffix}}, "has no app label")
	run.Decisions = append(run.Decisions, "unlabelled: denied: "+strings.ReplaceAll(msg, suffix, "SUFFIX"))
	elsewhere := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: "elsewhere-" + suffix}}
	run.Decisions = append(run.Decisions, "another namespace: "+admitted(vigiltest.Mutated(t, e.Client, elsewhere)))
	t.Cleanup(func() { _ = e.Client.Delete(context.Background(), elsewhere) })

	watcher := m.StartWatcher(2 * time.Minute)
	run.Ready = append(run.Ready, "watcher "+readyz(t, watcher, "probes"))
	vigiltest.Eventually(t, 30*time.Second, vigiltest.Get(e.Client, labelled, func(cm *corev1.ConfigMap) error {
		if cm.Annotations["reconciled"] != "true" {
			return fmt.Errorf("annotations %v: not reconciled yet", cm.Annotations)
		}
		return nil
	}))
	run.Decisions = append(run.Decisions, "labelled: reconciled")
	return run
}

// readyz is how the pod's port answers /readyz, as its readiness probe
// asks it: over HTTPS, its certificate unchecked, on the admission server's
// port, over HTTP on the watcher's probes port.
func readyz(t *testing.T, p *vigiltest.Pod, port string) string {
	t.Helper()
	addr := p.Ports[port]
	if addr == "" {
		t.Fatalf("pod %s has no %s port: %v", p.Name, port, p.Ports)
	}
	scheme := "http"
	if port == "https" {
		scheme = "https"
	}
	c := http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := c.Get(scheme + "://" + addr + "/readyz")
	if err != nil {
		t.Fatalf("GET /readyz of pod %s: %v", p.Name, err)
	}
	defer resp.Body.Close()
	return resp.Status
}

// admitted says what admission changed in an object it admitted.
func admitted(p vigiltest.Patch) string {
	if len(p) == 0 {
		return "admitted unchanged"
	}
	return "admitted with " + p.String()
}
