package vigiltest

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/vigilkit/vigil/internal/clusters/controlplane"
	"github.com/vigilkit/vigil/internal/clusters/kubeversion"
	"github.com/vigilkit/vigil/internal/clusters/podrun"
)

// startWithNode starts a node and the control plane that serves it
// (Options.Node).
func startWithNode(opts Options, release kubeversion.Release) (*Env, error) {
	if opts.DisableWatchCache || len(opts.APIServerFlags) > 0 {
		return nil, errors.New("vigiltest: Options.Node starts the node's own API server, which takes neither DisableWatchCache nor APIServerFlags: start a second Env without Node for those")
	}
	n, err := opts.Node(NodeOptions{KubernetesVersion: release.String(), Build: opts.Build, Output: opts.Output})
	if err != nil {
		return nil, err
	}
	cfg := n.Config()
	cfg.QPS, cfg.Burst = controlplane.DefaultQPS, controlplane.DefaultBurst
	if opts.QPS > 0 {
		cfg.QPS = opts.QPS
	}
	if opts.Burst > 0 {
		cfg.Burst = opts.Burst
	}
	e := &Env{Config: cfg, Scheme: opts.Scheme, BinDir: n.BinDir(), KubernetesVersion: release.String(), node: n}
	if err := e.clients(); err != nil {
		_ = n.Stop()
		return nil, err
	}
	if len(opts.CRDs) > 0 || len(opts.CRDPaths) > 0 {
		_, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{CRDs: opts.CRDs, Paths: opts.CRDPaths, Scheme: e.Scheme, ErrorIfPathMissing: true})
		if err != nil {
			_ = n.Stop()
			return nil, fmt.Errorf("vigiltest: install CRDs: %w", err)
		}
	}
	return e, nil
}

// onNode is what a module whose pods a node runs (ModuleOptions.OnNode)
// keeps: the replicas its manifests ask for, applied at 0 so that nothing
// runs before the test starts a role, as with the runner.
type onNode struct {
	image    string
	replicas map[string]int32 // by component
	started  map[string]*Pod  // by component
}

// forNode returns a copy of the manifests as the node is to run them: each
// Deployment at 0 replicas (what it asked for is kept in on) and, when on
// runs the module's image, its containers running that image with the
// options' env and args added, as the runner adds them.
func forNode(m *Manifests, on *onNode, opts ModuleOptions) (*Manifests, error) {
	out := &Manifests{}
	for _, u := range m.Objects {
		if u.GetKind() != "Deployment" {
			out.Objects = append(out.Objects, u.DeepCopy())
			continue
		}
		d := &appsv1.Deployment{}
		if err := k8sruntime.DefaultUnstructuredConverter.FromUnstructured(u.Object, d); err != nil {
			return nil, fmt.Errorf("Deployment %s: %w", u.GetName(), err)
		}
		on.replicas[d.Labels["app.kubernetes.io/component"]] = ptr.Deref(d.Spec.Replicas, 1)
		d.Spec.Replicas = ptr.To[int32](0)
		if on.image != "" {
			spec := &d.Spec.Template.Spec
			for _, cs := range []*[]corev1.Container{&spec.InitContainers, &spec.Containers} {
				for i := range *cs {
					c := &(*cs)[i]
					c.Image, c.ImagePullPolicy = on.image, corev1.PullIfNotPresent
					c.Args = append(c.Args, opts.Args[c.Name]...)
					for _, kv := range opts.Env {
						k, v, _ := strings.Cut(kv, "=")
						c.Env = append(c.Env, corev1.EnvVar{Name: k, Value: v})
					}
				}
			}
		}
		obj, err := k8sruntime.DefaultUnstructuredConverter.ToUnstructured(d)
		if err != nil {
			return nil, err
		}
		out.Objects = append(out.Objects, &unstructured.Unstructured{Object: obj})
	}
	return out, nil
}

// nodePod scales the role's Deployment to the replicas its manifests ask
// for, the first time, and returns its first pod once the API server has
// it: its containers are the kubelet's, followed through the API.
func (m *Module) nodePod(component string) *Pod {
	m.t.Helper()
	if p := m.node.started[component]; p != nil {
		return p
	}
	d, err := m.Manifests.Deployment(component)
	if err != nil {
		m.t.Fatal(err)
	}
	if d == nil {
		m.t.Fatalf("module %s has no %s Deployment in its manifests", m.Name, component)
	}
	ctx := m.t.Context()
	apps := m.env.Clientset.AppsV1().Deployments(d.Namespace)
	scale, err := apps.GetScale(ctx, d.Name, metav1.GetOptions{})
	if err != nil {
		m.t.Fatal(err)
	}
	scale.Spec.Replicas = m.node.replicas[component]
	if _, err := apps.UpdateScale(ctx, d.Name, scale, metav1.UpdateOptions{}); err != nil {
		m.t.Fatalf("scale %s to %d: %v", d.Name, scale.Spec.Replicas, err)
	}
	var first *corev1.Pod
	Eventually(m.t, 60*time.Second, func() error {
		pods, err := m.podsOf(ctx, d)
		if err != nil {
			return err
		}
		if len(pods) == 0 {
			return fmt.Errorf("waiting for a pod of Deployment %s: none yet", d.Name)
		}
		first = &pods[0]
		return nil
	})
	p := &Pod{Name: first.Name, Namespace: first.Namespace, UID: string(first.UID), Ports: map[string]string{},
		t: m.t, env: m.env, spec: first.Spec, meta: first.ObjectMeta, deployment: d.Name}
	m.node.started[component] = p
	m.pods = append(m.pods, p)
	return p
}

// podsOf lists the pods of the Deployment, the oldest first.
func (m *Module) podsOf(ctx context.Context, d *appsv1.Deployment) ([]corev1.Pod, error) {
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil, err
	}
	pods, err := m.env.Clientset.CoreV1().Pods(d.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, err
	}
	items := pods.Items
	sort.Slice(items, func(i, j int) bool {
		return items[i].CreationTimestamp.Before(&items[j].CreationTimestamp) ||
			items[i].CreationTimestamp.Equal(&items[j].CreationTimestamp) && items[i].Name < items[j].Name
	})
	return items, nil
}

// waitRolledOut waits until every replica of the role's Deployment is
// ready, and fills the pod's Ports with its IP; it fails the test with
// where each pod is and what the role's containers said.
func (m *Module) waitRolledOut(component string, p *Pod, timeout time.Duration) {
	m.t.Helper()
	d, err := m.Manifests.Deployment(component)
	if err != nil {
		m.t.Fatal(err)
	}
	ctx := m.t.Context()
	// What the role's containers said, read once, when the wait failed.
	defer func() {
		if m.t.Failed() {
			m.t.Logf("what the %s containers of %s said:\n%s", component, d.Name, m.Output(component))
		}
	}()
	Eventually(m.t, timeout, func() error {
		if err := m.env.node.Check(ctx); err != nil {
			m.t.Fatalf("waiting for %s: %v", d.Name, err)
		}
		have, err := m.env.Clientset.AppsV1().Deployments(d.Namespace).Get(ctx, d.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		want := m.node.replicas[component]
		if have.Status.ReadyReplicas < want || have.Status.UpdatedReplicas < want {
			pods, _ := m.podsOf(ctx, d)
			return fmt.Errorf("waiting for every replica of %s to be ready: %d of %d are; %s", d.Name, have.Status.ReadyReplicas, want, podrun.States(pods))
		}
		return nil
	})
	pod, err := m.env.Clientset.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
	if err != nil {
		m.t.Fatal(err)
	}
	for _, c := range pod.Spec.Containers {
		for _, port := range c.Ports {
			key := port.Name
			if key == "" {
				key = fmt.Sprint(port.ContainerPort)
			}
			p.Ports[key] = fmt.Sprintf("%s:%d", pod.Status.PodIP, port.ContainerPort)
		}
	}
}

// follow returns a Process that stands for the pod's container as the
// kubelet runs it: its Output the container's log, read through the API,
// and its exit the container's first termination.
func (p *Pod) follow(container string) *Process {
	proc := &Process{Output: &Buffer{}, exited: make(chan struct{}), container: container,
		desc: "container " + container + " of pod " + p.Namespace + "/" + p.Name}
	p.procs = append(p.procs, proc)
	ctx := p.t.Context()
	pods := p.env.Clientset.CoreV1().Pods(p.Namespace)
	go func() {
		for {
			term := containerTerminated(ctx, pods, p.Name, container)
			if logs, err := pods.GetLogs(p.Name, &corev1.PodLogOptions{Container: container}).DoRaw(ctx); err == nil {
				proc.Output.set(logs)
			}
			if term != nil {
				proc.code = int(term.ExitCode)
				close(proc.exited)
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	return proc
}

// containerTerminated is the container's terminated state, once it has
// one; nil while it waits or runs.
func containerTerminated(ctx context.Context, pods interface {
	Get(context.Context, string, metav1.GetOptions) (*corev1.Pod, error)
}, pod, container string) *corev1.ContainerStateTerminated {
	got, err := pods.Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	for _, s := range append(append([]corev1.ContainerStatus(nil), got.Status.InitContainerStatuses...), got.Status.ContainerStatuses...) {
		if s.Name != container {
			continue
		}
		if s.State.Terminated != nil {
			return s.State.Terminated
		}
		if s.LastTerminationState.Terminated != nil {
			return s.LastTerminationState.Terminated
		}
	}
	return nil
}

// nodeDir is where, on this machine, the kubelet keeps the folder path of
// container c of the pod: under the emptyDir mounted over it ("" when no
// emptyDir holds it).
func (m *Module) nodeDir(p *Pod, c corev1.Container, path string) string {
	for _, vm := range c.VolumeMounts {
		if rel, ok := strings.CutPrefix(path, vm.MountPath); ok {
			return filepath.Join(m.env.node.EmptyDir(p.UID, vm.Name), rel)
		}
	}
	return ""
}

// nodeOutput is what the role's containers of that name have logged, in
// every pod of the module.
func (m *Module) nodeOutput(container string) string {
	ds, err := m.Manifests.Deployments()
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, d := range ds {
		pods, err := m.podsOf(context.Background(), d)
		if err != nil {
			continue
		}
		for _, pod := range pods {
			for _, c := range append(append([]corev1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...) {
				if c.Name != container {
					continue
				}
				logs, err := m.env.Clientset.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: c.Name}).DoRaw(m.t.Context())
				if err == nil && len(logs) > 0 {
					fmt.Fprintf(&b, "--- pod %s:\n%s", pod.Name, logs)
				}
			}
		}
	}
	return b.String()
}

// stopOnNode scales the pod's Deployment to 0 and waits until its pods are
// gone, as a kubelet stops them; it returns the exit codes the pod's last
// status showed.
func (p *Pod) stopOnNode() map[string]int {
	ctx := context.Background()
	out := map[string]int{}
	apps := p.env.Clientset.AppsV1().Deployments(p.Namespace)
	scale, err := apps.GetScale(ctx, p.deployment, metav1.GetOptions{})
	if err != nil {
		if !apierrors.IsNotFound(err) {
			p.t.Errorf("stop pod %s: %v", p.Name, err)
		}
		return out
	}
	scale.Spec.Replicas = 0
	if _, err := apps.UpdateScale(ctx, p.deployment, scale, metav1.UpdateOptions{}); err != nil {
		p.t.Errorf("stop pod %s: scale %s to 0: %v", p.Name, p.deployment, err)
		return out
	}
	deadline := time.Now().Add(p.grace() + 30*time.Second)
	for time.Now().Before(deadline) {
		got, err := p.env.Clientset.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return out
		}
		if err == nil {
			for _, s := range got.Status.ContainerStatuses {
				if s.State.Terminated != nil {
					out[s.Name] = int(s.State.Terminated.ExitCode)
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	p.t.Errorf("stop pod %s: still there %s after its Deployment was scaled to 0", p.Name, p.grace()+30*time.Second)
	return out
}

// waitGone waits until no pod of the module's Deployments is left, after an
// uninstall: the next install into the same namespace meets none.
func (m *Module) waitGone(ds []*appsv1.Deployment) {
	deadline := time.Now().Add(2 * time.Minute)
	for _, d := range ds {
		for {
			pods, err := m.podsOf(context.Background(), d)
			if err == nil && len(pods) == 0 {
				break
			}
			if time.Now().After(deadline) {
				m.t.Errorf("uninstall: pods of %s still there after 2m: %s (%v)", d.Name, podrun.States(pods), err)
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}
