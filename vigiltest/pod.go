package vigiltest

import (
	"context"
	"fmt"

	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/vigilkit/vigil/internal/clusters/podrun"
	"github.com/vigilkit/vigil/internal/definition/spec"
)

// PodOptions say how RunPod emulates a kubelet.
type PodOptions struct {
	// Binary is the module binary: it stands for the image's entrypoint, so
	// each container runs it with its args.
	Binary string
	// Name of the pod; the pod spec's owner name plus a random suffix when
	// empty.
	Name string
	// Args are added to the args of the container of that name, after its
	// own (such as "--shutdown-delay", "0s" for a test).
	Args map[string][]string
	// Env ("KEY=value" each) is added to every container's environment,
	// after its own, as a platform's overlay of the manifests would.
	Env []string
}

// Pod is a pod a test runs as a kubelet would, as far as that can be done
// without a container runtime:
//   - each container's command and args, the module binary standing for the
//     image;
//   - its env, the downward API resolved (metadata.name, .namespace, .uid,
//     .labels, .annotations, spec.serviceAccountName, spec.nodeName,
//     status.podIP 127.0.0.1) and Secret and ConfigMap keys read from the API
//     server as the kubelet reads them, a missing one failing the container
//     as CreateContainerConfigError does unless optional;
//   - its volumes: Secret and ConfigMap data as files at their mount paths
//     under the pod's Root, emptyDirs as folders there; an arg (or a
//     --flag=value's value) or env value that is a path under a mount is
//     rewritten to the same path under Root (a path inside a longer string,
//     such as a shell script, is not);
//   - init containers one at a time, in order, each to exit 0 before the
//     next, then the containers;
//   - identity: a real token of the pod's ServiceAccount from the
//     TokenRequest API, handed to each process as the kubeconfig of
//     $KUBECONFIG (where a pod has its token file), never impersonation;
//   - ports: a container port given as ":PORT" in an arg is served on a free
//     loopback port instead (Ports); the Service in front of an admission
//     container is its --webhook-url, https://127.0.0.1:PORT.
//
// What needs a container runtime (the user, the read-only root filesystem,
// the in-cluster token path) is checked on the spec instead: see
// CheckPodSpec.
type Pod struct {
	Name, Namespace, UID string
	// Root holds the pod's volumes at their mount paths.
	Root string
	// Ports maps each container port's name (or number) to the loopback
	// address that serves it.
	Ports map[string]string
	// Kubeconfig is the ServiceAccount's, with its token.
	Kubeconfig string

	t    testing.TB
	env  *Env
	spec corev1.PodSpec
	meta metav1.ObjectMeta
	opts PodOptions
	init int // init containers run so far
	// mounted: the volumes are in place (before the first container).
	mounted bool
	procs   []*Process
	// deployment, for a pod a node runs (ModuleOptions.OnNode): its
	// Deployment, which Stop scales to 0.
	deployment string
	// webhookURL, when set, is the admission container's --webhook-url:
	// the Service in front of several replicas.
	webhookURL string
}

// NewPod prepares a pod of the spec in namespace: its token and its ports.
// It runs nothing yet: see StartInit, RunInit, RunInits and Start; its
// volumes are mounted before its first container runs, as the kubelet
// mounts them. The ServiceAccount must exist (apply the module's manifests
// first), and the Secrets and ConfigMaps its volumes need by the time a
// container starts.
func (e *Env) NewPod(t testing.TB, namespace string, tmpl corev1.PodTemplateSpec, opts PodOptions) *Pod {
	t.Helper()
	if opts.Binary == "" {
		t.Fatal("vigiltest.NewPod: PodOptions.Binary is empty: build the module with BuildModule and pass its path")
	}
	name := opts.Name
	if name == "" {
		base := tmpl.Labels["app.kubernetes.io/name"]
		if c := tmpl.Labels["app.kubernetes.io/component"]; c != "" {
			base += "-" + c
		}
		if base == "" {
			base = "pod"
		}
		name = base + "-" + rand.String(5)
	}
	p := &Pod{Name: name, Namespace: namespace, UID: string(uuid()), Root: t.TempDir(), Ports: map[string]string{},
		t: t, env: e, spec: *tmpl.Spec.DeepCopy(), meta: *tmpl.ObjectMeta.DeepCopy(), opts: opts}
	p.meta.Name, p.meta.Namespace = name, namespace
	if err := p.token(t.Context()); err != nil {
		t.Fatalf("pod %s: %v", name, err)
	}
	for _, c := range slices.Concat(p.spec.InitContainers, p.spec.Containers) {
		for _, port := range c.Ports {
			key := port.Name
			if key == "" {
				key = strconv.Itoa(int(port.ContainerPort))
			}
			if _, ok := p.Ports[key]; !ok {
				p.Ports[key] = FreeAddr(t)
			}
		}
	}
	return p
}

// Process is the process last run for the named container ("admission",
// "watcher", "gate-phase-0", ...), or nil: for its output or its memory
// (Process.Memory).
func (p *Pod) Process(container string) *Process {
	for i := len(p.procs) - 1; i >= 0; i-- {
		if p.procs[i].container == container {
			return p.procs[i]
		}
	}
	return nil
}

// InitContainers is how many init containers the pod has; Inited, how many
// ran.
func (p *Pod) InitContainers() int { return len(p.spec.InitContainers) }

// Inited is how many init containers have run.
func (p *Pod) Inited() int { return p.init }

// StartInit starts the next init container and returns its process,
// running: for a test that acts while it waits. The next init container, or
// the containers, must not start before it exits 0.
func (p *Pod) StartInit() *Process {
	p.t.Helper()
	p.notOnNode()
	if p.init >= len(p.spec.InitContainers) {
		p.t.Fatalf("pod %s: all %d init containers ran", p.Name, len(p.spec.InitContainers))
	}
	proc := p.run(p.spec.InitContainers[p.init])
	p.init++
	return proc
}

// RunInit runs the next init container to its end and returns its process,
// exited. It fails the test if the container exits non-zero or has not
// ended within timeout.
func (p *Pod) RunInit(timeout time.Duration) *Process {
	p.t.Helper()
	proc := p.StartInit()
	if code := proc.Wait(p.t, timeout); code != 0 {
		p.t.Fatalf("pod %s: init container %s exited %d:\n%s", p.Name, proc.container, code, proc.Output)
	}
	return proc
}

// RunInits runs the init containers not run yet, in order.
func (p *Pod) RunInits(timeout time.Duration) []*Process {
	p.t.Helper()
	var out []*Process
	for p.init < len(p.spec.InitContainers) {
		out = append(out, p.RunInit(timeout))
	}
	return out
}

// Start runs the init containers not run yet, then starts the containers
// and returns their processes, running.
func (p *Pod) Start(initTimeout time.Duration) []*Process {
	p.t.Helper()
	p.notOnNode()
	p.RunInits(initTimeout)
	var out []*Process
	for _, c := range p.spec.Containers {
		out = append(out, p.run(c))
	}
	return out
}

// Stop sends SIGTERM to the pod's running processes, as the kubelet does,
// and waits up to the pod's grace period (30s when unset) for each; it
// returns their exit codes by container.
//
// A pod a node runs is stopped by scaling its Deployment to 0.
func (p *Pod) Stop() map[string]int {
	p.t.Helper()
	if p.deployment != "" {
		return p.stopOnNode()
	}
	for _, proc := range p.procs {
		select {
		case <-proc.Exited():
		default:
			_ = proc.Cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	out := map[string]int{}
	for _, proc := range p.procs {
		out[proc.container] = p.stop(proc)
	}
	return out
}

// notOnNode fails the test for a pod a node runs: its containers are the
// kubelet's to start.
func (p *Pod) notOnNode() {
	p.t.Helper()
	if p.deployment != "" {
		p.t.Fatalf("pod %s runs on a node, whose kubelet starts its containers: use the Module's StartPhase, RunGates, StartAdmission and StartWatcher", p.Name)
	}
}

// run starts container c as a process.
func (p *Pod) run(c corev1.Container) *Process {
	p.t.Helper()
	if !p.mounted {
		if err := p.mountVolumes(p.t.Context()); err != nil {
			p.t.Fatalf("pod %s: %v", p.Name, err)
		}
		p.mounted = true
	}
	env, err := p.envOf(p.t.Context(), c)
	if err != nil {
		p.t.Fatalf("pod %s, container %s: %v (the kubelet would report CreateContainerConfigError)", p.Name, c.Name, err)
	}
	// The command's first word is the image's entrypoint: the binary.
	args := p.rewrite(c, podrun.Args(c))
	if len(args) > 0 && args[0] == "admission" && !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--webhook-url") }) {
		if p.webhookURL != "" {
			args = append(args, "--webhook-url", p.webhookURL)
		} else if addr, ok := p.Ports["https"]; ok {
			args = append(args, "--webhook-url", "https://"+addr)
		}
	}
	args = append(args, p.opts.Args[c.Name]...)
	proc := startProcess(p.t, env, p.opts.Binary, args...)
	proc.container = c.Name
	p.procs = append(p.procs, proc)
	// Registered after startProcess's kill, so it runs before: a
	// graceful stop, as the kubelet's, lets a watcher release its Lease.
	p.t.Cleanup(func() { p.stop(proc) })
	return proc
}

// grace is the pod's termination grace period.
func (p *Pod) grace() time.Duration {
	if s := p.spec.TerminationGracePeriodSeconds; s != nil {
		return time.Duration(*s) * time.Second
	}
	return 30 * time.Second
}

// stop sends SIGTERM and waits up to the grace period, then kills.
func (p *Pod) stop(proc *Process) int {
	select {
	case <-proc.Exited():
		return proc.ExitCode()
	default:
	}
	_ = proc.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-proc.Exited():
	case <-time.After(p.grace()):
		_ = proc.Cmd.Process.Kill()
		<-proc.Exited()
	}
	return proc.ExitCode()
}

// rewrite turns paths under mounts into paths under Root and ":PORT" of a
// container port into its loopback address.
func (p *Pod) rewrite(c corev1.Container, args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = podrun.LocalArg(c, p.Root, a)
		for _, port := range c.Ports {
			key := port.Name
			if key == "" {
				key = strconv.Itoa(int(port.ContainerPort))
			}
			for _, form := range []string{":", "0.0.0.0:", "[::]:"} {
				if out[i] == form+strconv.Itoa(int(port.ContainerPort)) {
					out[i] = p.Ports[key]
				}
			}
		}
	}
	return out
}

// envOf is the container's environment, as the kubelet gives it, plus
// KUBECONFIG for the pod's token, PATH, HOME and TMPDIR.
func (p *Pod) envOf(ctx context.Context, c corev1.Container) ([]string, error) {
	home := filepath.Join(p.Root, "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		return nil, err
	}
	// VIGIL_MOUNT_ROOT tells the module's mount handles (vigil.MountSecret's
	// Path and File) where the pod's volumes are.
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TMPDIR=" + home, "KUBECONFIG=" + p.Kubeconfig,
		"GOCOVERDIR=" + os.Getenv("GOCOVERDIR"), spec.EnvMountRoot + "=" + p.Root}
	own, err := p.pod().Env(ctx, p.source(), c.Name)
	if err != nil {
		return nil, err
	}
	for _, kv := range own {
		k, v, _ := strings.Cut(kv, "=")
		env = append(env, k+"="+podrun.Local(c, p.Root, v))
	}
	return append(env, p.opts.Env...), nil
}

// pod is the pod as the runner resolves its containers.
func (p *Pod) pod() *podrun.Pod {
	return &podrun.Pod{Spec: p.spec, Name: p.Name, Namespace: p.Namespace, UID: p.UID,
		Labels: p.meta.Labels, Annotations: p.meta.Annotations, NodeName: "vigiltest-node", IP: "127.0.0.1"}
}

// source reads the pod's Secrets and ConfigMaps from the API server, as the
// kubelet does.
func (p *Pod) source() podrun.Source { return podrun.Client(p.env.Clientset, p.Namespace) }

// mountVolumes writes each volume a container mounts under Root, at the
// mount path: Secret and ConfigMap keys as files, emptyDirs as folders.
func (p *Pod) mountVolumes(ctx context.Context) error {
	pod := p.pod()
	for _, c := range slices.Concat(p.spec.InitContainers, p.spec.Containers) {
		if err := pod.Mount(ctx, p.source(), c.Name, p.Root, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// token asks the TokenRequest API for a token of the pod's ServiceAccount,
// bound to nothing, and writes it as the pod's kubeconfig.
func (p *Pod) token(ctx context.Context) error {
	sa := p.spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	tr, err := p.env.Clientset.CoreV1().ServiceAccounts(p.Namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("a token of ServiceAccount %s/%s from the TokenRequest API: %w (apply the module's manifests first)", p.Namespace, sa, err)
	}
	cfg := &rest.Config{Host: p.env.Config.Host, BearerToken: tr.Status.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: p.env.Config.CAData, CAFile: p.env.Config.CAFile, ServerName: p.env.Config.ServerName}}
	p.Kubeconfig = writeKubeConfigIn(p.t, p.Root, cfg)
	return nil
}

func uuid() string {
	return fmt.Sprintf("%s-%s-%s-%s-%s", rand.String(8), rand.String(4), rand.String(4), rand.String(4), rand.String(12))
}
