package node

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/vigilkit/vigil/internal/clusters/controlplane"
	"github.com/vigilkit/vigil/internal/clusters/kubeversion"
)

// EnvE2E turns on the tests that run a real node (make e2e sets it): they
// need root, and change the machine while they run.
const EnvE2E = "VIGIL_E2E"

// startNode starts a node for a test, or skips the test where e2e tests are
// not asked for; asked for under CI, a node that cannot run fails the test.
func startNode(t *testing.T) *Node {
	t.Helper()
	if os.Getenv(EnvE2E) == "" {
		t.Skipf("a real node: set %s=1 (make e2e) to run it", EnvE2E)
	}
	ctx := t.Context()
	release := testRelease(t)
	cp, err := controlplane.Ensure(ctx, release, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	nodeBin, err := controlplane.EnsureNode(ctx, release, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	containerdDir, err := controlplane.EnsureContainerd(ctx, release, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := Start(ctx, Options{ControlPlaneDir: cp, NodeDir: nodeBin, ContainerdDir: containerdDir, Progress: os.Stderr, APIServerFlags: controlplane.ServingFlags(release)})
	if err != nil {
		t.Fatalf("start the node: %v", err)
	}
	t.Cleanup(func() {
		if err := n.Stop(); err != nil {
			t.Errorf("stop the node: %v", err)
		}
	})
	return n
}

// A node runs a pod from an image imported by digest (no registry),
// reaches the API server through the kubernetes Service from inside the
// pod's network, and leaves nothing behind on the machine at Stop.
func TestNodeRunsAPodAndLeavesNothing(t *testing.T) {
	n := startNode(t)
	ctx := t.Context()
	cs, err := kubernetes.NewForConfig(n.Config)
	if err != nil {
		t.Fatal(err)
	}
	// The pause image, imported again under a name of the test's, by
	// digest: a pod that names REPO:TAG@sha256:... finds it.
	ref, digest := importTestImage(t, n)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "digest", Namespace: "default"},
		Spec: corev1.PodSpec{
			Containers:      []corev1.Container{{Name: "c", Image: ref + "@" + digest, ImagePullPolicy: corev1.PullIfNotPresent}},
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532)},
		},
	}
	began := time.Now()
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var got *corev1.Pod
	waitUntil(t, 90*time.Second, "the pod to run", func() error {
		if err := n.Check(ctx); err != nil {
			return err
		}
		if got, err = cs.CoreV1().Pods("default").Get(ctx, "digest", metav1.GetOptions{}); err != nil {
			return err
		}
		for _, c := range got.Status.ContainerStatuses {
			if c.State.Waiting != nil {
				return fmt.Errorf("container waiting: %s: %s", c.State.Waiting.Reason, c.State.Waiting.Message)
			}
		}
		if got.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("pod %s", got.Status.Phase)
		}
		return nil
	})
	t.Logf("pod from %s@%s Running %s after create, at %s", ref, digest, time.Since(began).Round(100*time.Millisecond), got.Status.PodIP)
	if ip := net.ParseIP(got.Status.PodIP); ip == nil || !strings.HasPrefix(got.Status.PodIP, "10.203.0.") {
		t.Errorf("pod IP %q: want one of the node's pod range %s", got.Status.PodIP, podCIDR)
	}
	// The kubernetes Service leads to the API server through kube-proxy's
	// rules: from the pod's network namespace, its ClusterIP answers.
	waitUntil(t, 30*time.Second, "the kubernetes Service's ClusterIP from the pod's network", func() error {
		return dialFromPod(t, n, got, kubernetesServiceIP+":443")
	})

	// The kubelet dies mid-test: the next Check says so, with its last
	// lines, and Stop still leaves nothing behind, the pod's container
	// included.
	kubelet := n.component("kubelet")
	if err := syscall.Kill(kubelet.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-kubelet.done
	err = n.Check(ctx)
	if err == nil || !strings.Contains(err.Error(), "the node's kubelet exited") || !strings.Contains(err.Error(), "last lines:\n") ||
		len(strings.Split(err.Error(), "\n")) < 5 {
		t.Errorf("Check after the kubelet was killed: %v; want the kubelet named with its last lines", err)
	}
	t.Logf("Check after the kubelet was killed: %.300s…", err)

	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := net.InterfaceByName(bridgeName); err == nil {
		t.Errorf("bridge %s still there after Stop", bridgeName)
	}
	if _, err := os.Stat(DefaultDir); err == nil {
		t.Errorf("%s still there after Stop", DefaultDir)
	}
	if out, _ := exec.Command(lookPath("iptables"), "-t", "nat", "-S").CombinedOutput(); strings.Contains(string(out), "KUBE-SERVICES") {
		t.Errorf("kube-proxy's chains still in iptables after Stop:\n%s", out)
	}
	for _, h := range []string{"/sys/fs/cgroup/memory/kubepods", "/sys/fs/cgroup/cpu/kubepods", "/sys/fs/cgroup/kubepods"} {
		if _, err := os.Stat(h); err == nil {
			t.Errorf("cgroup %s still there after Stop", h)
		}
	}
}

// importTestImage exports the pause image, which the node imported by its
// tag only, and imports it again through ImportImage with its digest: a pod
// that names it REPO:TAG@sha256:... then finds it, as it does an image that
// vigil image --node loads.
func importTestImage(t *testing.T, n *Node) (ref, digest string) {
	t.Helper()
	list, err := ctr(t.Context(), n.layout, "images", "list")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(list, "\n") {
		f := strings.Fields(line)
		if len(f) > 2 && f[0] == sandboxImage {
			digest = f[2]
		}
		if strings.Contains(line, "@sha256:") {
			t.Fatalf("an image named by digest before ImportImage named one:\n%s", list)
		}
	}
	if !strings.HasPrefix(digest, "sha256:") {
		t.Fatalf("no digest of %s in ctr images list:\n%s", sandboxImage, list)
	}
	archive := filepath.Join(t.TempDir(), "image.tar")
	if out, err := ctr(t.Context(), n.layout, "images", "export", archive, sandboxImage); err != nil {
		t.Fatalf("export the pause image: %v %s", err, out)
	}
	if err := n.ImportImage(t.Context(), archive, sandboxImage, digest); err != nil {
		t.Fatal(err)
	}
	return sandboxImage, digest
}

// dialFromPod opens a TCP connection to addr from the pod's network
// namespace.
func dialFromPod(t *testing.T, n *Node, pod *corev1.Pod, addr string) error {
	t.Helper()
	list, err := ctr(t.Context(), n.layout, "tasks", "list")
	if err != nil {
		return err
	}
	var pid string
	for _, line := range strings.Split(list, "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[2] == "RUNNING" {
			pid = f[1]
			break
		}
	}
	if pid == "" {
		return fmt.Errorf("no running task:\n%s", list)
	}
	host, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(lookPath("nsenter"), "-t", pid, "-n", "/bin/bash", "-c", fmt.Sprintf("exec 3<>/dev/tcp/%s/%s", host, port))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("connect to %s from pod %s (pid %s): %v %s", addr, pod.Name, pid, err, out)
	}
	return nil
}

func waitUntil(t *testing.T, within time.Duration, what string, check func() error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), within)
	defer cancel()
	var last error
	for {
		if last = check(); last == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: not within %s; last: %v", what, within, last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// testRelease is the Kubernetes release $VIGIL_KUBERNETES_VERSION names,
// the default when unset.
func testRelease(t *testing.T) kubeversion.Release {
	t.Helper()
	r, err := kubeversion.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	return r
}
