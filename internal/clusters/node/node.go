package node

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// DefaultDir is the node's folder. One node runs on a machine at a time:
// its bridge and addresses are fixed.
const DefaultDir = "/var/lib/vigil/node"

// DefaultName is the node's name.
const DefaultName = "vigil-node"

// Options say what Start runs.
type Options struct {
	// ControlPlaneDir holds etcd and kube-apiserver (controlplane.Ensure).
	ControlPlaneDir string
	// NodeDir holds the node binaries (controlplane.EnsureNode).
	NodeDir string
	// Name is the node's name; DefaultName when empty.
	Name string
	// Progress receives a line per step; nil discards them.
	Progress io.Writer
	// Output, when set, receives every component's own log besides its
	// file in the node's folder.
	Output io.Writer
	// Go is the go command that builds the pause image; "go" when empty.
	Go string
	// APIServerFlags are extra kube-apiserver flags (name without dashes →
	// value): the release's controlplane.ServingFlags.
	APIServerFlags map[string]string
	// ContainerdDir holds a built containerd (containerd,
	// containerd-shim-runc-v2, ctr: controlplane.EnsureContainerd); empty:
	// the machine's containerd package, installed when missing.
	ContainerdDir string
}

// Node is a running node and the control plane that serves it.
type Node struct {
	// Name is the node's name.
	Name string
	// Kubeconfig is an admin kubeconfig (system:masters) for the API
	// server, at https://10.203.0.1:6443.
	Kubeconfig string
	// Config is the same as a rest.Config, without client-side rate limits.
	Config *rest.Config
	// cs is a clientset over Config, for the node's own checks.
	cs kubernetes.Interface

	layout  layout
	opts    Options
	reaper  *exec.Cmd
	release *os.File
	mu      sync.Mutex
	procs   []*component
	stop    sync.Once
	stopErr error
}

// component is one process of the node.
type component struct {
	name string
	pid  int
	done chan struct{}
	err  error
}

// Start checks the machine, installs the runtime's packages when they are
// missing, and starts a control plane and one node, returning once the node
// is Ready and ServiceAccounts work. The node and every change it made to
// the machine go at Stop, or when this process dies (a reaper undoes them).
func Start(ctx context.Context, o Options) (n *Node, err error) {
	if o.Name == "" {
		o.Name = DefaultName
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Go == "" {
		o.Go = "go"
	}
	if err := Preflight(); err != nil {
		return nil, err
	}
	if err := EnsureRuntime(ctx, o.ContainerdDir != "", o.Progress); err != nil {
		return nil, err
	}
	began := time.Now()
	n = &Node{Name: o.Name, layout: layout{dir: DefaultDir}, opts: o}
	if err := n.clearLeftovers(ctx); err != nil {
		return nil, err
	}
	if err := n.prepare(); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w%s", err, n.lastLines())
			_ = n.Stop()
		}
	}()
	steps := []struct {
		what string
		run  func(context.Context) error
	}{
		{"containerd, with the pause image built here", n.startContainerd},
		{"etcd and kube-apiserver on " + bridgeIP, n.startAPIServer},
		{"kube-controller-manager and kube-scheduler", n.startControllers},
		{"the kubelet and kube-proxy; waiting for the node to be Ready", n.startNode},
	}
	for i, s := range steps {
		t := time.Now()
		fmt.Fprintf(o.Progress, "vigil: [%d/%d] %s\n", i+1, len(steps), s.what)
		if err := s.run(ctx); err != nil {
			return nil, err
		}
		fmt.Fprintf(o.Progress, "vigil:       done in %s\n", time.Since(t).Round(100*time.Millisecond))
	}
	fmt.Fprintf(o.Progress, "vigil: node %s Ready, %s after start\n", n.Name, time.Since(began).Round(100*time.Millisecond))
	return n, nil
}

// clearLeftovers undoes what a node that died without its reaper left. A
// node whose vigil still runs is not a leftover: it is refused, not torn
// down under its owner.
func (n *Node) clearLeftovers(ctx context.Context) error {
	if pid, ok := liveOwner(n.layout); ok {
		return fmt.Errorf("%w: a node already runs on this machine (vigil, pid %d, in %s): stop it (Ctrl-C, or kill %d, whose reaper undoes it) before starting another", ErrCannotRun, pid, n.layout.dir, pid)
	}
	script := n.layout.path("teardown.sh")
	if _, err := os.Stat(script); err == nil {
		fmt.Fprintf(n.opts.Progress, "vigil: a node's folder is left in %s: undoing what it changed first\n", n.layout.dir)
		if out, err := exec.CommandContext(ctx, "/bin/sh", script).CombinedOutput(); err != nil {
			return fmt.Errorf("undo the node left in %s (%s): %w\n%s", n.layout.dir, script, err, out)
		}
	} else if _, err := os.Stat(n.layout.dir); err == nil {
		if err := os.RemoveAll(n.layout.dir); err != nil {
			return fmt.Errorf("remove %s, left by another node: %w", n.layout.dir, err)
		}
	}
	if _, err := net.InterfaceByName(bridgeName); err == nil {
		return fmt.Errorf("%w: the bridge %s exists, and no node of vigil's left it: another node runs on this machine (stop it), or delete the bridge (ip link del %s)", ErrCannotRun, bridgeName, bridgeName)
	}
	return nil
}

// prepare writes the node's folder (configuration, certificates and the
// teardown that undoes it all), makes the bridge and starts the reaper.
func (n *Node) prepare() error {
	l := n.layout
	for _, d := range []string{l.logs(), l.path("containerd"), l.path("kubelet")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := writeOwner(l); err != nil {
		return err
	}
	if err := writeTeardown(l, n.opts.NodeDir); err != nil {
		return err
	}
	reaper, release, err := startReaper(l)
	if err != nil {
		return err
	}
	n.reaper, n.release = reaper, release
	// The API server binds the bridge's address: the bridge comes first.
	for _, args := range [][]string{
		{"link", "add", bridgeName, "type", "bridge"},
		{"addr", "add", bridgeIP + "/24", "dev", bridgeName},
		{"link", "set", bridgeName, "up"},
	} {
		if out, err := exec.Command(lookPath("ip"), args...).CombinedOutput(); err != nil {
			_ = n.Stop()
			return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
	}
	server := "https://" + net.JoinHostPort(bridgeIP, strconv.Itoa(apiServerPort))
	hosts := []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "localhost", bridgeIP, kubernetesServiceIP, "127.0.0.1"}
	kubeconfigs, err := writePKI(l.dir, server, n.Name, hosts)
	if err != nil {
		_ = n.Stop()
		return err
	}
	n.Kubeconfig = kubeconfigs["admin"]
	cfg, err := clientcmd.BuildConfigFromFlags("", n.Kubeconfig)
	if err != nil {
		_ = n.Stop()
		return err
	}
	cfg.QPS, cfg.Burst = -1, 0
	n.Config = cfg
	if n.cs, err = kubernetes.NewForConfig(cfg); err != nil {
		_ = n.Stop()
		return err
	}
	return nil
}

func (n *Node) startContainerd(ctx context.Context) error {
	conf, err := writeContainerdConfig(n.layout)
	if err != nil {
		return err
	}
	if err := writeCNIConfig(n.layout); err != nil {
		return err
	}
	path, env := lookPath("containerd"), []string(nil)
	if d := n.opts.ContainerdDir; d != "" {
		// Linked into the node's folder, so that ctr is found there by
		// this process and by `vigil node load` in another; the shim is
		// found on containerd's PATH.
		if path, err = linkContainerd(n.layout, d); err != nil {
			return err
		}
		env = append(os.Environ(), "PATH="+n.layout.bin()+string(os.PathListSeparator)+os.Getenv("PATH"))
	}
	if err := n.runEnv("containerd", path, env, "--config", conf); err != nil {
		return err
	}
	if err := n.waitFor(ctx, "containerd", 30*time.Second, func() error {
		_, err := ctr(ctx, n.layout, "version")
		return err
	}); err != nil {
		return err
	}
	return importPause(ctx, n.layout, n.opts.Go)
}

// extraAPIServerFlags are Options.APIServerFlags as arguments, in order.
func (n *Node) extraAPIServerFlags() []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(n.opts.APIServerFlags)) {
		out = append(out, "--"+k+"="+n.opts.APIServerFlags[k])
	}
	return out
}

func (n *Node) startAPIServer(ctx context.Context) error {
	l := n.layout
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(freePort())
	peerURL := "http://127.0.0.1:" + strconv.Itoa(freePort())
	if err := n.run("etcd", filepath.Join(n.opts.ControlPlaneDir, "etcd"),
		"--name", "vigil", "--data-dir", l.path("etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "vigil="+peerURL, "--unsafe-no-fsync"); err != nil {
		return err
	}
	if err := n.waitFor(ctx, "etcd", 30*time.Second, func() error { return httpOK(etcdURL + "/health") }); err != nil {
		return err
	}
	pki := func(f string) string { return l.path("pki", f) }
	args := []string{
		"--etcd-servers", etcdURL,
		// Pods reach the API server at the bridge's address, through
		// the kubernetes Service's ClusterIP that kube-proxy rewrites.
		"--advertise-address", bridgeIP, "--bind-address", bridgeIP, "--secure-port", strconv.Itoa(apiServerPort),
		"--tls-cert-file", pki("apiserver.crt"), "--tls-private-key-file", pki("apiserver.key"),
		"--client-ca-file", pki("ca.crt"), "--cert-dir", l.path("apiserver"),
		"--service-cluster-ip-range", serviceIPs,
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file", pki("sa.pub"), "--service-account-signing-key-file", pki("sa.key"),
		"--authorization-mode", "Node,RBAC",
		"--kubelet-client-certificate", pki("apiserver-kubelet-client.crt"), "--kubelet-client-key", pki("apiserver-kubelet-client.key"),
		// The node's InternalIP, not its name through the machine's
		// resolver, for logs and exec.
		"--kubelet-preferred-address-types", "InternalIP",
		// Webhook Services are reached at their Pods' addresses: the API
		// server runs on the host, outside kube-proxy's reach.
		"--enable-aggregator-routing=true",
		"--allow-privileged=true",
	}
	if err := n.run("kube-apiserver", filepath.Join(n.opts.ControlPlaneDir, "kube-apiserver"), append(args, n.extraAPIServerFlags()...)...); err != nil {
		return err
	}
	return n.waitFor(ctx, "kube-apiserver", 60*time.Second, func() error {
		return n.cs.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error()
	})
}

func (n *Node) startControllers(context.Context) error {
	l := n.layout
	pki := func(f string) string { return l.path("pki", f) }
	kcm := pki("kube-controller-manager.kubeconfig")
	if err := n.run("kube-controller-manager", filepath.Join(n.opts.NodeDir, "kube-controller-manager"),
		"--kubeconfig", kcm, "--authentication-kubeconfig", kcm, "--authorization-kubeconfig", kcm,
		// Each controller with its own ServiceAccount, as kubeadm sets
		// it: otherwise bootstrap RBAC refuses them, kube-root-ca.crt is
		// never published and the node keeps its not-ready taint.
		"--use-service-account-credentials=true",
		"--service-account-private-key-file", pki("sa.key"), "--root-ca-file", pki("ca.crt"),
		"--cluster-signing-cert-file", pki("ca.crt"), "--cluster-signing-key-file", pki("ca.key"),
		"--cluster-name", "vigil", "--leader-elect=false", "--secure-port=0",
	); err != nil {
		return err
	}
	sched := pki("kube-scheduler.kubeconfig")
	return n.run("kube-scheduler", filepath.Join(n.opts.NodeDir, "kube-scheduler"),
		"--kubeconfig", sched, "--authentication-kubeconfig", sched, "--authorization-kubeconfig", sched,
		"--leader-elect=false", "--secure-port=0")
}

func (n *Node) startNode(ctx context.Context) error {
	l := n.layout
	conf, err := writeKubeletConfig(l, freePort())
	if err != nil {
		return err
	}
	if err := n.run("kubelet", filepath.Join(n.opts.NodeDir, "kubelet"),
		"--config", conf, "--kubeconfig", l.path("pki", "kubelet.kubeconfig"),
		"--hostname-override", n.Name, "--node-ip", bridgeIP,
		"--root-dir", l.path("kubelet", "root"), "--cert-dir", l.path("kubelet", "pki"),
	); err != nil {
		return err
	}
	if err := n.run("kube-proxy", filepath.Join(n.opts.NodeDir, "kube-proxy"),
		"--kubeconfig", l.path("pki", "kube-proxy.kubeconfig"), "--hostname-override", n.Name,
		"--cluster-cidr", podCIDR, "--proxy-mode", "iptables",
		// Leave the machine's conntrack settings and route_localnet as
		// they are.
		"--conntrack-max-per-core=0", "--conntrack-tcp-timeout-established=0", "--conntrack-tcp-timeout-close-wait=0",
		"--iptables-localhost-nodeports=false",
		"--healthz-bind-address", "127.0.0.1:"+strconv.Itoa(freePort()),
		"--metrics-bind-address", "127.0.0.1:"+strconv.Itoa(freePort()),
	); err != nil {
		return err
	}
	if err := n.waitFor(ctx, "the node to be Ready", 120*time.Second, func() error { return n.ready(ctx) }); err != nil {
		return err
	}
	return n.waitFor(ctx, "ServiceAccounts (the default one and kube-root-ca.crt)", 60*time.Second, func() error {
		if _, err := n.cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{}); err != nil {
			return err
		}
		_, err := n.cs.CoreV1().ConfigMaps("default").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return err
	})
}

// ready is nil once the node is Ready and untainted of not-ready.
func (n *Node) ready(ctx context.Context) error {
	node, err := n.cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("node %s not registered yet", n.Name)
	}
	if err != nil {
		return err
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
			return fmt.Errorf("node %s: Ready=%s (%s: %s)", n.Name, c.Status, c.Reason, c.Message)
		}
		if c.Type == corev1.NodeReady {
			for _, t := range node.Spec.Taints {
				if t.Key == corev1.TaintNodeNotReady {
					return fmt.Errorf("node %s: Ready, still tainted %s", n.Name, t.Key)
				}
			}
			return nil
		}
	}
	return fmt.Errorf("node %s: no Ready condition yet", n.Name)
}

// Check is nil while every component runs and the node is Ready, and
// otherwise says why not: the component that exited, with its last lines,
// or the node's condition, with the kubelet's.
func (n *Node) Check(ctx context.Context) error {
	if c := n.exited(); c != nil {
		return fmt.Errorf("the node's %s exited (%v); its last lines:\n%s", c.name, c.err, n.tail(c.name, 20))
	}
	if err := n.ready(ctx); err != nil {
		return fmt.Errorf("%w\nthe kubelet's last lines:\n%s", err, n.tail("kubelet", 20))
	}
	return nil
}

// run starts one component, its output in its log file, and records its
// PID for the teardown.
func (n *Node) run(name, path string, args ...string) error {
	return n.runEnv(name, path, nil, args...)
}

// runEnv is run with the environment env; the process's own when nil.
func (n *Node) runEnv(name, path string, env []string, args ...string) error {
	if path == "" {
		return fmt.Errorf("%s is not installed", name)
	}
	logPath := filepath.Join(n.layout.logs(), name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return err
	}
	cmd := exec.Command(path, args...)
	cmd.Env = env
	var out io.Writer = f
	if n.opts.Output != nil {
		out = io.MultiWriter(f, prefixed(n.opts.Output, name))
	}
	cmd.Stdout, cmd.Stderr = out, out
	// A process group of its own: a Ctrl-C at the terminal reaches vigil,
	// which stops the node in order, not every component at once.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	if err := appendLine(n.layout.path("pids"), strconv.Itoa(cmd.Process.Pid)); err != nil {
		_ = cmd.Process.Kill()
		return err
	}
	c := &component{name: name, pid: cmd.Process.Pid, done: make(chan struct{})}
	go func() { c.err = cmd.Wait(); f.Close(); close(c.done) }()
	n.mu.Lock()
	n.procs = append(n.procs, c)
	n.mu.Unlock()
	return nil
}

// waitFor polls check until it passes, failing when within passes or a
// component exits first, naming what it waited for and what it last saw.
func (n *Node) waitFor(ctx context.Context, what string, within time.Duration, check func() error) error {
	deadline := time.Now().Add(within)
	var last error
	for {
		if last = check(); last == nil {
			return nil
		}
		if c := n.exited(); c != nil {
			return fmt.Errorf("waiting for %s: %s exited (%v)", what, c.name, c.err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waiting for %s: not within %s; last: %v", what, within, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// component is the running node's component of that name, or nil.
func (n *Node) component(name string) *component {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, c := range n.procs {
		if c.name == name {
			return c
		}
	}
	return nil
}

// exited is the first component that has exited, or nil.
func (n *Node) exited() *component {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, c := range n.procs {
		select {
		case <-c.done:
			return c
		default:
		}
	}
	return nil
}

// lastLines are the last lines of the logs of the components that exited,
// and of the last one started, for an error.
func (n *Node) lastLines() string {
	n.mu.Lock()
	procs := append([]*component(nil), n.procs...)
	n.mu.Unlock()
	var b strings.Builder
	for i, c := range procs {
		select {
		case <-c.done:
		default:
			if i != len(procs)-1 {
				continue
			}
		}
		fmt.Fprintf(&b, "\n%s's last lines:\n%s", c.name, n.tail(c.name, 15))
	}
	return b.String()
}

// tail is the last lines of a component's log.
func (n *Node) tail(name string, lines int) string {
	data, err := os.ReadFile(filepath.Join(n.layout.logs(), name+".log"))
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	return lastLines(string(data), lines)
}

// Stop stops the node and undoes every change it made to the machine:
// the reaper runs the teardown, as it would had this process died.
func (n *Node) Stop() error {
	n.stop.Do(func() {
		if n.release == nil {
			return
		}
		_ = n.release.Close()
		done := make(chan error, 1)
		go func() { done <- n.reaper.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				n.stopErr = fmt.Errorf("undo the node's changes (%s): %w", n.layout.path("teardown.sh"), err)
			}
		case <-time.After(2 * time.Minute):
			n.stopErr = errors.New("the node's teardown did not finish within 2 minutes")
		}
	})
	return n.stopErr
}

// writeOwner records the process that runs the node: its PID and start
// time, which together name it even after the PID is reused.
func writeOwner(l layout) error {
	start, err := processStart(os.Getpid())
	if err != nil {
		return err
	}
	return os.WriteFile(l.path("owner"), []byte(fmt.Sprintf("%d %s\n", os.Getpid(), start)), 0o644)
}

// liveOwner reports the process recorded as running the node in l, when it
// still runs.
func liveOwner(l layout) (pid int, alive bool) {
	data, err := os.ReadFile(l.path("owner"))
	if err != nil {
		return 0, false
	}
	var start string
	if _, err := fmt.Sscan(string(data), &pid, &start); err != nil {
		return 0, false
	}
	now, err := processStart(pid)
	return pid, err == nil && now == start
}

// processStart is a process's start time, in clock ticks since boot (field
// 22 of /proc/PID/stat, read after the command's closing parenthesis).
func processStart(pid int) (string, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", err
	}
	i := strings.LastIndexByte(string(data), ')')
	fields := strings.Fields(string(data[i+1:]))
	if i < 0 || len(fields) < 20 {
		return "", fmt.Errorf("/proc/%d/stat: unexpected %q", pid, data)
	}
	return fields[19], nil
}

// freePort is a TCP port free on loopback now.
func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func httpOK(url string) error {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = fmt.Fprintln(f, line)
	return err
}

// prefixed writes each line to w behind the component's name.
func prefixed(w io.Writer, name string) io.Writer {
	pr, pw := io.Pipe()
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			fmt.Fprintf(w, "%s: %s\n", name, sc.Text())
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	return pw
}

// EmptyDir is where the kubelet keeps a pod's emptyDir volume on this
// machine: what a test reads a pod's files from.
func (n *Node) EmptyDir(podUID, volume string) string {
	return n.layout.path("kubelet", "root", "pods", podUID, "volumes", "kubernetes.io~empty-dir", volume)
}
