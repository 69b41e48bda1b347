package scale

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/vigilkit/vigil/vigiltest"
)

//go:embed testdata/stages.yaml
var stages []byte

// kwokNode is the annotation kwok manages the simulated nodes by.
const kwokNode = "kwok.x-k8s.io/node"

// daemon is a component of the simulated cluster: kube-controller-manager,
// kube-scheduler or kwok, its output in a file, killed with the bench.
type daemon struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

// startDaemon starts bin with args, its output in dir/name.log; it dies
// with this process.
func startDaemon(b *testing.B, dir, name, bin string, args ...string) *daemon {
	b.Helper()
	d := &daemon{name: name, log: filepath.Join(dir, name+".log"), done: make(chan struct{})}
	out, err := os.Create(d.log)
	if err != nil {
		b.Fatal(err)
	}
	d.cmd = exec.Command(bin, args...)
	d.cmd.Stdout, d.cmd.Stderr = out, out
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := d.cmd.Start(); err != nil {
		b.Fatalf("start %s: %v", name, err)
	}
	go func() { d.err = d.cmd.Wait(); out.Close(); close(d.done) }()
	b.Cleanup(func() {
		_ = d.cmd.Process.Kill()
		<-d.done
	})
	return d
}

// alive is nil while the component runs, else what it said last.
func (d *daemon) alive() error {
	select {
	case <-d.done:
		return fmt.Errorf("%s exited (%v); its last lines:\n%s", d.name, d.err, d.tail(15))
	default:
		return nil
	}
}

// tail is the last n lines of the component's log.
func (d *daemon) tail(n int) string {
	data, _ := os.ReadFile(d.log)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// startCluster runs what turns the control plane into a cluster whose
// nodes and pods kwok simulates: the controllers Deployments and Jobs need
// (no node-lifecycle controller: the nodes send no heartbeats), the
// scheduler, and kwok.
func startCluster(b *testing.B, nodeDir, kwokDir, kubeconfig string) []*daemon {
	dir := b.TempDir()
	sched := filepath.Join(dir, "scheduler.yaml")
	if err := os.WriteFile(sched, []byte(fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %q
  qps: 1000
  burst: 2000
leaderElection:
  leaderElect: false
`, kubeconfig)), 0o644); err != nil {
		b.Fatal(err)
	}
	stagesFile := filepath.Join(dir, "stages.yaml")
	if err := os.WriteFile(stagesFile, stages, 0o644); err != nil {
		b.Fatal(err)
	}
	return []*daemon{
		startDaemon(b, dir, "kube-controller-manager", filepath.Join(nodeDir, "kube-controller-manager"),
			"--kubeconfig", kubeconfig, "--leader-elect=false", "--secure-port=0",
			"--controllers", "deployment-controller,replicaset-controller,job-controller,serviceaccount-controller,garbage-collector-controller,namespace-controller,ttl-after-finished-controller",
			"--kube-api-qps=1000", "--kube-api-burst=2000",
			"--concurrent-deployment-syncs=10", "--concurrent-replicaset-syncs=20", "--concurrent-job-syncs=20"),
		startDaemon(b, dir, "kube-scheduler", filepath.Join(nodeDir, "kube-scheduler"),
			"--config", sched, "--secure-port=0"),
		startDaemon(b, dir, "kwok", filepath.Join(kwokDir, "kwok"),
			"--kubeconfig", kubeconfig, "--config", stagesFile,
			"--manage-all-nodes=false", "--manage-nodes-with-annotation-selector", kwokNode+"=fake",
			"--node-lease-duration-seconds=0", "--cidr", "10.0.0.0/8", "--node-ip", "10.255.255.1"),
	}
}

// checkCluster fails the bench, naming the component, when one exited.
func checkCluster(b *testing.B, ds []*daemon) {
	b.Helper()
	for _, d := range ds {
		if err := d.alive(); err != nil {
			b.Fatalf("the simulated cluster failed, so no figure of this step stands: %v", err)
		}
	}
}

// createNodes creates n nodes kwok simulates, each with a pod CIDR of its
// own, and waits until every one is Ready.
func createNodes(b *testing.B, cs kubernetes.Interface, ds []*daemon, n int) {
	ctx := b.Context()
	var g errgroup.Group
	g.SetLimit(32)
	for i := range n {
		g.Go(func() error {
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("kwok-node-%04d", i),
				Annotations: map[string]string{kwokNode: "fake"}, Labels: map[string]string{"type": "kwok"}},
				Spec: corev1.NodeSpec{PodCIDR: fmt.Sprintf("10.%d.%d.0/24", i/256, i%256)}}
			_, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				err = nil
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatalf("create the simulated nodes: %v", err)
	}
	waitFor(b, ds, 5*time.Minute, fmt.Sprintf("%d nodes Ready", n), func() (bool, string) {
		list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "type=kwok"})
		if err != nil {
			return false, err.Error()
		}
		ready := 0
		for _, nd := range list.Items {
			for _, c := range nd.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		return ready == n, fmt.Sprintf("%d of %d Ready", ready, n)
	})
	// The API server taints a new node not-ready, and the node-lifecycle
	// controller, which the bench does not run, would lift the taint.
	for i := range n {
		g.Go(func() error {
			_, err := cs.CoreV1().Nodes().Patch(ctx, fmt.Sprintf("kwok-node-%04d", i), types.MergePatchType, []byte(`{"spec":{"taints":null}}`), metav1.PatchOptions{})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatalf("lift the simulated nodes' not-ready taint: %v", err)
	}
}

// waitFor polls cond until it holds, failing the bench after within or
// when a component of the cluster exited; it logs progress every 15 s.
func waitFor(b *testing.B, ds []*daemon, within time.Duration, what string, cond func() (bool, string)) {
	b.Helper()
	began, said := time.Now(), time.Now()
	for {
		ok, state := cond()
		if ok {
			say("%s after %s", what, time.Since(began).Round(100*time.Millisecond))
			return
		}
		checkCluster(b, ds)
		if time.Since(began) > within {
			var logs strings.Builder
			for _, d := range ds {
				fmt.Fprintf(&logs, "\n%s's last lines:\n%s", d.name, d.tail(8))
			}
			b.Fatalf("not %s within %s: %s%s", what, within, state, logs.String())
		}
		if time.Since(said) > 15*time.Second {
			say("waiting for %s: %s (%s)", what, state, time.Since(began).Round(time.Second))
			said = time.Now()
		}
		time.Sleep(5 * time.Second)
	}
}

// say prints a line of progress on stderr at once (a benchmark's own log
// shows only when it ends).
func say(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench-scale: %s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// workloadNamespace is the i-th of the namespaces the workloads run in.
func workloadNamespace(i int) string { return fmt.Sprintf("scale-%04d", i) }

// workloadPod is the pod template of the workloads: compliant with every
// policy of UDS Core's engine, so that admission allows it after its
// checks, as it allows most pods of a real cluster.
func workloadPod(app string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: ptr.To(false),
			SecurityContext:              &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](1000)},
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.example/app@sha256:" + strings.Repeat("ab", 32),
				Args:  []string{"--listen=:8080"},
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			}},
		},
	}
}

// grow sets each of the namespaces' Deployment and Job so that the cluster
// runs about pods pods: four fifths from Deployments, one fifth from Jobs
// that complete (their pods stay, Succeeded, as a Job's do).
func grow(b *testing.B, cs kubernetes.Interface, namespaces, pods int) {
	ctx := b.Context()
	per := pods / namespaces
	jobs := per / 5
	replicas := int32(per - jobs)
	var g errgroup.Group
	g.SetLimit(16)
	for i := range namespaces {
		ns := workloadNamespace(i)
		g.Go(func() error {
			d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				Template: workloadPod("web")}}
			_, err := cs.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				_, err = cs.AppsV1().Deployments(ns).Patch(ctx, "web", "application/merge-patch+json",
					fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas), metav1.PatchOptions{})
			}
			if err != nil || jobs == 0 {
				return err
			}
			name := fmt.Sprintf("batch-%d", pods)
			tmpl := workloadPod("batch")
			tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
			j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: batchv1.JobSpec{
				Completions: ptr.To(int32(jobs)), Parallelism: ptr.To(int32(jobs)), Template: tmpl}}
			_, err = cs.BatchV1().Jobs(ns).Create(ctx, j, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				err = nil
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatalf("grow the workloads to %d pods: %v", pods, err)
	}
}

// workloadPods counts the workloads' pods from their controllers' status:
// the Deployments' ready replicas and the Jobs' succeeded and ready pods. It
// lists 2,000 small objects where a count of the pods themselves would list
// every pod.
func workloadPods(ctx context.Context, cs kubernetes.Interface) (ready, succeeded int, err error) {
	deps, err := cs.AppsV1().Deployments("").List(ctx, metav1.ListOptions{LabelSelector: ""})
	if err != nil {
		return 0, 0, err
	}
	for _, d := range deps.Items {
		ready += int(d.Status.ReadyReplicas)
	}
	jobs, err := cs.BatchV1().Jobs("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, 0, err
	}
	for _, j := range jobs.Items {
		ready += int(ptr.Deref(j.Status.Ready, 0))
		succeeded += int(j.Status.Succeeded)
	}
	return ready, succeeded, nil
}

// createNamespaces creates the workloads' namespaces, vouched for as an
// admin creates them.
func createNamespaces(b *testing.B, env *vigiltest.Env, n int) {
	var g errgroup.Group
	g.SetLimit(32)
	for i := range n {
		g.Go(func() error {
			_, err := env.Clientset.CoreV1().Namespaces().Create(b.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: workloadNamespace(i)}}, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				err = nil
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatalf("create the workloads' namespaces: %v", err)
	}
}
