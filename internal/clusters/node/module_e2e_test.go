package node

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/vigilkit/vigil/internal/clusters/controlplane"
	"github.com/vigilkit/vigil/internal/clusters/podrun"
	"github.com/vigilkit/vigil/internal/shipping/image"
)

// The seed's scenario on a real node, from the clusterconfig module's own
// image and chart (installed, upgraded and uninstalled with the Helm SDK): installed before its CRDs exist, the CRDs applied
// late and the ClusterConfig later still, a gate container killed while it
// waits. The kubelet runs the three gate phases in order as init
// containers (the killed one again, from the start), the admission replicas
// become Ready and register, the watcher (which has no gates) waits for its
// kinds without a restart, and the API server calls the webhook on the
// pods: a Pod is labelled, a privileged Pod denied, then admitted under an
// Exemption. A rolling upgrade from 1.0.0 to 2.0.0 rejects no create and
// leaves none unlabelled; the uninstall (its pre-delete hook unregisters)
// leaves nothing behind but what the chart keeps.
func TestClusterConfigModuleOnANode(t *testing.T) {
	began := time.Now()
	n := startNode(t)
	nodeReady := time.Since(began)
	ctx := t.Context()
	cs, err := kubernetes.NewForConfig(n.Config)
	if err != nil {
		t.Fatal(err)
	}
	example := filepath.Join("..", "..", "..", "examples", "clusterconfig")
	ref, binary := moduleImage(t, n, example, "1.0.0")

	// The platform creates the defaults Secret before the module, which
	// mounts it.
	const ns = "uds-system"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defaults, err := os.ReadFile(filepath.Join(example, "defaults.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "uds-core-defaults"},
		Data: map[string][]byte{"defaults.yaml": defaults}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	installed := time.Now()
	rel := installChart(t, n, binary, ref, "uds-core", ns)

	// Before its CRDs: the gate of phase 0 waits, the watcher waits and is
	// not restarted.
	time.Sleep(10 * time.Second)
	if r := restarts(t, cs, ns, "watcher"); r != 0 {
		t.Fatalf("the watcher restarted %d times before its CRDs were installed: want it to wait", r)
	}
	// vigil status names the phase and gate each starting pod waits in.
	starting := statusWhileStarting(t, cs)
	crds, err := os.ReadFile(filepath.Join(example, "crds.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	kubectl(t, n, crds, "apply", "-f", "-")
	// Phase 1 waits for the ClusterConfig: its container is killed there,
	// and the kubelet runs it again, from the start.
	killed := killInitContainer(t, n, cs, ns, "gate-phase-1")
	cc, err := os.ReadFile(filepath.Join(example, "clusterconfig.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	kubectl(t, n, cc, "apply", "-f", "-")

	waitUntil(t, 3*time.Minute, "the admission replicas to be Ready", func() error {
		if err := n.Check(ctx); err != nil {
			return err
		}
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, "uds-core", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.Status.ReadyReplicas < ptr.Deref(d.Spec.Replicas, 1) {
			return fmt.Errorf("%d of %d admission replicas Ready; pods: %s", d.Status.ReadyReplicas, ptr.Deref(d.Spec.Replicas, 1), podStates(ctx, cs, ns))
		}
		return nil
	})
	admissionReady := time.Since(installed)
	inOrder := phasesInOrder(t, cs, ns)

	apps := "e2e-apps"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: apps}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Registered when ready: once the webhooks are called, a Pod is
	// labelled with the ClusterConfig's cluster name.
	waitUntil(t, 60*time.Second, "the API server to call the module's webhooks", func() error {
		p, err := cs.CoreV1().Pods(apps).Create(ctx, testPod("plain", false), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return err
		}
		if got := p.Labels["uds.dev/cluster"]; got != "demo-cluster" {
			return fmt.Errorf("a Pod's uds.dev/cluster label is %q, want demo-cluster", got)
		}
		return nil
	})
	denied := 0
	_, err = cs.CoreV1().Pods(apps).Create(ctx, testPod("privileged", true), metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "privileged") {
		t.Fatalf("a privileged Pod: got %v, want it denied", err)
	}
	denied++
	t.Logf("privileged Pod denied: %v", err)
	// vigil monitor shows that decision, from the admission pods' logs.
	monitored := monitorSees(t, cs, ns, apps, "privileged")

	// An Exemption in the exemptions namespace, for a namespace an admin
	// created: the node exporter may run privileged.
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "monitoring"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	exemption, err := os.ReadFile(filepath.Join(example, "exemption.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	kubectl(t, n, exemption, "apply", "-f", "-")
	exempted := 0
	waitUntil(t, 30*time.Second, "the Exemption to admit the node exporter", func() error {
		_, err := cs.CoreV1().Pods("monitoring").Create(ctx, testPod("node-exporter-x", true), metav1.CreateOptions{})
		return err
	})
	exempted++
	restartsAll := restarts(t, cs, ns, "")
	watcherRestarts := restarts(t, cs, ns, "watcher")
	t.Logf("gate-phase-1 of pod %s killed while it waited; restarts in all: %d", killed, restartsAll)

	// A rolling upgrade from version 1.0.0 to 2.0.0 while Pods are created
	// without pause: none is rejected, none goes in unlabelled, and 2.0.0
	// takes the registration over.
	if v := registeredVersion(t, cs, "uds-core"); v != "1.0.0" {
		t.Fatalf("the webhooks were registered by version %q, want 1.0.0 (the image's, stamped at build)", v)
	}
	ref2, binary2 := moduleImage(t, n, example, "2.0.0")
	flow := createPods(ctx, cs, apps)
	rel.upgrade(binary2, ref2)
	waitUntil(t, 3*time.Minute, "the upgrade to roll out", func() error {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, "uds-core", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.Status.ObservedGeneration < d.Generation || d.Status.UpdatedReplicas < ptr.Deref(d.Spec.Replicas, 1) ||
			d.Status.ReadyReplicas < ptr.Deref(d.Spec.Replicas, 1) || d.Status.Replicas != ptr.Deref(d.Spec.Replicas, 1) {
			return fmt.Errorf("rollout: %d updated, %d ready, %d in all; pods: %s", d.Status.UpdatedReplicas, d.Status.ReadyReplicas, d.Status.Replicas, podStates(ctx, cs, ns))
		}
		return nil
	})
	waitUntil(t, 60*time.Second, "version 2.0.0 to register the webhooks", func() error {
		if v := registeredVersion(t, cs, "uds-core"); v != "2.0.0" {
			return fmt.Errorf("registered by version %q", v)
		}
		return nil
	})
	time.Sleep(3 * time.Second) // creates go on a moment against the new replicas only
	created, rejected, unlabelled := flow()
	for _, e := range rejected {
		t.Errorf("a create was rejected during the upgrade: %s", e)
	}
	for _, name := range unlabelled {
		t.Errorf("Pod %s was created unlabelled during the upgrade: its mutation was skipped", name)
	}
	if created == 0 {
		t.Error("no Pod was created during the upgrade: the test checked nothing")
	}

	// Uninstall with Helm: the chart's pre-delete hook, a Job of the
	// module's image on the node, unregisters the webhooks first.
	rel.uninstall()
	left := leftAfterUninstall(t, n, rel.owned())
	waitUntil(t, 90*time.Second, "the module's pods and its hook's to go", func() error {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err == nil && len(pods.Items) > 0 {
			return fmt.Errorf("%s", podStates(ctx, cs, ns))
		}
		return err
	})
	fmt.Printf("e2e: node_ready_s=%.1f phases_in_order=%t admission_ready_s=%.1f denied=%d exempted=%d restarts=%d upgrade_rejected=%d uninstall_left=%d upgrade_creates=%d upgrade_unmutated=%d watcher_restarts=%d status_starting=%d monitor_denied_after_s=%.1f\n",
		nodeReady.Seconds(), inOrder, admissionReady.Seconds(), denied, exempted, restartsAll, len(rejected), len(left), created, len(unlabelled), watcherRestarts, starting, monitored.Seconds())
	if !inOrder {
		t.Error("the gate phases did not run in order")
	}
	if watcherRestarts != 0 {
		t.Errorf("the watcher restarted %d times: want it to wait for its kinds instead", watcherRestarts)
	}
	for _, l := range left {
		t.Errorf("left after uninstall: %s", l)
	}
}

// killInitContainer waits until an admission pod runs the init container
// and kills its process, as an OOM kill or a node hiccup would; it waits
// until the kubelet has started it again and returns the pod's name.
func killInitContainer(t *testing.T, n *Node, cs kubernetes.Interface, ns, container string) string {
	t.Helper()
	ctx := t.Context()
	var pod, id string
	waitUntil(t, 60*time.Second, container+" to run", func() error {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=admission"})
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			for _, s := range p.Status.InitContainerStatuses {
				if s.Name == container && s.State.Running != nil {
					pod, id = p.Name, strings.TrimPrefix(s.ContainerID, "containerd://")
					return nil
				}
			}
		}
		return fmt.Errorf("no admission pod runs %s: %s", container, podStates(ctx, cs, ns))
	})
	if _, err := ctr(ctx, n.layout, "tasks", "kill", "--signal", "SIGKILL", id); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 60*time.Second, container+" of "+pod+" to run again", func() error {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, s := range p.Status.InitContainerStatuses {
			if s.Name == container && s.RestartCount > 0 && s.State.Running != nil {
				return nil
			}
		}
		return fmt.Errorf("%s not restarted yet: %s", container, podStates(ctx, cs, ns))
	})
	return pod
}

// createPods creates Pods in ns without pause until the returned func is
// called, which stops and says how many were created, which creates were
// rejected and which Pods went in without the module's label.
func createPods(ctx context.Context, cs kubernetes.Interface, ns string) func() (created int, rejected, unlabelled []string) {
	stop := make(chan struct{})
	done := make(chan struct{})
	var created int
	var rejected, unlabelled []string
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			// Bound to no node: admitted as any Pod is, never run, so the
			// flow does not load the node it measures.
			pod := testPod(fmt.Sprintf("flow-%d", i), false)
			pod.Spec.NodeName = "e2e-nowhere"
			p, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
			if err != nil {
				rejected = append(rejected, err.Error())
				continue
			}
			created++
			if p.Labels["uds.dev/cluster"] != "demo-cluster" {
				unlabelled = append(unlabelled, p.Name)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return func() (int, []string, []string) {
		close(stop)
		<-done
		return created, rejected, unlabelled
	}
}

// leftAfterUninstall lists the objects of the manifests that still exist,
// and the module's webhook configurations (which registration fills, and
// unregister empties or removes).
func leftAfterUninstall(t *testing.T, n *Node, manifests []byte) []string {
	t.Helper()
	dir, err := controlplane.Ensure(t.Context(), testRelease(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), filepath.Join(dir, "kubectl"), "--kubeconfig", n.Kubeconfig, "get", "--ignore-not-found", "-o", "name", "-f", "-")
	cmd.Stdin = bytes.NewReader(manifests)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl get -f the manifests: %v\n%s", err, out)
	}
	var left []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l != "" {
			left = append(left, l)
		}
	}
	cmd = exec.CommandContext(t.Context(), filepath.Join(dir, "kubectl"), "--kubeconfig", n.Kubeconfig, "get", "-o", "name",
		"mutatingwebhookconfigurations,validatingwebhookconfigurations,validatingadmissionpolicies,validatingadmissionpolicybindings,mutatingadmissionpolicies,mutatingadmissionpolicybindings")
	out, err = cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl get the admission configurations: %v\n%s", err, out)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.Contains(l, "uds-core") {
			left = append(left, l)
		}
	}
	return left
}

// registeredVersion is the module version the validating webhook
// configuration's registration record names.
func registeredVersion(t *testing.T, cs kubernetes.Interface, module string) string {
	t.Helper()
	c, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(t.Context(), module, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Version string `json:"version"`
	}
	_ = json.Unmarshal([]byte(c.Annotations["vigil.dev/registration"]), &rec)
	return rec.Version
}

// moduleImage builds the module in dir for this machine's platform, with
// version as its OCI version label and the module's version (stamped into
// the binary; the example's Options name none), loads
// it into the node as vigil image --node does, and returns its reference
// (REPO:TAG@sha256:…) and the module binary taken from the image, which
// renders the manifests.
func moduleImage(t *testing.T, n *Node, dir, version string) (ref, binary string) {
	t.Helper()
	res, err := image.Build(t.Context(), image.Options{Dir: dir, Platforms: []v1.Platform{{OS: "linux", Architecture: runtime.GOARCH}}, Version: version, Log: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag("vigil.local/e2e/" + filepath.Base(dir) + ":" + version)
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	archive := filepath.Join(tmp, "image.tar")
	if err := image.WriteTarball(res, archive, &tag); err != nil {
		t.Fatal(err)
	}
	if err := n.ImportImage(t.Context(), archive, tag.Name(), res.Digest.String()); err != nil {
		t.Fatal(err)
	}
	binary = filepath.Join(tmp, "module")
	if err := image.ExtractBinary(res, binary); err != nil {
		t.Fatal(err)
	}
	return tag.Name() + "@" + res.Digest.String(), binary
}

// kubectl runs the control plane's kubectl against the node, stdin given.
func kubectl(t *testing.T, n *Node, stdin []byte, args ...string) {
	t.Helper()
	dir, err := controlplane.Ensure(t.Context(), testRelease(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), filepath.Join(dir, "kubectl"), append([]string{"--kubeconfig", n.Kubeconfig}, args...)...)
	cmd.Stdin = bytes.NewReader(stdin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// restarts sums the restarts of the containers (init containers too) of
// the module's pods of a component ("" for all).
func restarts(t *testing.T, cs kubernetes.Interface, ns, component string) int {
	t.Helper()
	sel := "app.kubernetes.io/name=uds-core"
	if component != "" {
		sel += ",app.kubernetes.io/component=" + component
	}
	pods, err := cs.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) == 0 {
		t.Fatalf("no pods of %q in %s", sel, ns)
	}
	n := 0
	for _, p := range pods.Items {
		for _, c := range append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
			n += int(c.RestartCount)
		}
	}
	return n
}

// phasesInOrder reports whether, in every admission pod, each gate phase's
// init container exited 0 before the next one started.
func phasesInOrder(t *testing.T, cs kubernetes.Interface, ns string) bool {
	t.Helper()
	pods, err := cs.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=admission"})
	if err != nil {
		t.Fatal(err)
	}
	ok := len(pods.Items) > 0
	for _, p := range pods.Items {
		var last time.Time
		if len(p.Status.InitContainerStatuses) != 3 {
			t.Errorf("pod %s: %d init containers, want the 3 gate phases", p.Name, len(p.Status.InitContainerStatuses))
			ok = false
		}
		for i, s := range p.Status.InitContainerStatuses {
			term := s.State.Terminated
			if s.Name != fmt.Sprintf("gate-phase-%d", i) || term == nil || term.ExitCode != 0 {
				t.Errorf("pod %s: init container %d is %s in state %+v: want gate-phase-%d exited 0", p.Name, i, s.Name, s.State, i)
				ok = false
				continue
			}
			if term.StartedAt.Time.Before(last) {
				t.Errorf("pod %s: %s started at %s, before the phase before it finished (%s)", p.Name, s.Name, term.StartedAt, last)
				ok = false
			}
			last = term.FinishedAt.Time
			t.Logf("pod %s: %s ran %s → %s", p.Name, s.Name, term.StartedAt.Format(time.TimeOnly), term.FinishedAt.Format(time.TimeOnly))
		}
	}
	return ok
}

// podStates says, for an error, where each pod of ns is.
func podStates(ctx context.Context, cs kubernetes.Interface, ns string) string {
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	return podrun.States(pods.Items)
}

// testPod is a Pod of the pause image, privileged or not.
func testPod(name string, privileged bool) *corev1.Pod {
	c := corev1.Container{Name: "c", Image: sandboxImage, ImagePullPolicy: corev1.PullIfNotPresent}
	if privileged {
		c.SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{Containers: []corev1.Container{c}}}
}
