package dev

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/vigilkit/vigil/internal/clusters/controlplane"
	"github.com/vigilkit/vigil/internal/clusters/kubeversion"
	"github.com/vigilkit/vigil/internal/commands/policytest"
	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/runtime/events"
)

// Options configure a session.
type Options struct {
	// Path is the folder of the module's main package; "." when empty.
	Path string
	// Kubeconfig names the cluster: a file, or a list as KUBECONFIG holds
	// them. When empty, an embedded control plane is started.
	Kubeconfig string
	// Context is the kubeconfig context; its current one when empty.
	Context string
	// Kubernetes is the release of the embedded control plane, without
	// Kubeconfig; $VIGIL_KUBERNETES_VERSION, else the default, when zero.
	Kubernetes kubeversion.Release
	// Progress receives the control plane's build progress, on first use.
	Progress io.Writer
	// OnEvent receives every event, one at a time, in order.
	OnEvent func(Event)
	// GateProgress is how often a waiting gate reports; 1s when zero.
	GateProgress time.Duration
}

// Session is a module running locally in all its roles.
type Session struct {
	// Module and Namespace are the module's name and namespace.
	Module, Namespace string
	// Config is an admin config of the cluster the module runs against.
	Config *rest.Config
	// Kubeconfig is what the module's processes are given as KUBECONFIG.
	Kubeconfig string
	// Started is when the session began: the timeline's zero.
	Started time.Time

	opts    Options
	plan    *spec.Module
	tmp     string
	bin     string
	handoff string
	cs      kubernetes.Interface
	cp      *controlplane.Instance
	// unreap stops the reaper that kills cp with a killed vigil dev.
	unreap  func()
	config  *Materialiser
	kubectl string // the embedded control plane's kubectl

	emitMu sync.Mutex

	mu        sync.Mutex
	stopping  bool // roles' errors from here on are their shutdown's
	procs     []*proc
	admission bool // the admission role was started: its configurations exist

	done chan struct{}
	err  error
}

// Start builds the module, reads its plan, brings up the cluster, removes what
// an earlier session of the module left there when it was killed, and starts
// running the module's roles in the background; it returns once they are
// started. The session ends when ctx does (or a role fails): Wait returns then.
func Start(ctx context.Context, o Options) (_ *Session, err error) {
	s, err := prepare(ctx, o)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			s.release()
		}
	}()
	if err := s.removeLeftovers(ctx); err != nil {
		return nil, err
	}
	if err := s.ensureNamespace(ctx); err != nil {
		return nil, err
	}
	go s.run(ctx)
	return s, nil
}

// Wait returns when the session is over: nil when its context ended, the
// error of a phase or role that failed otherwise.
func (s *Session) Wait() error {
	<-s.done
	return s.err
}

// Run runs a session until ctx ends or a role fails.
func Run(ctx context.Context, o Options) error {
	s, err := Start(ctx, o)
	if err != nil {
		return err
	}
	return s.Wait()
}

func (s *Session) emit(e Event) {
	if e.At.IsZero() {
		e.At = time.Now()
	}
	s.emitMu.Lock()
	defer s.emitMu.Unlock()
	if s.opts.OnEvent != nil {
		s.opts.OnEvent(e)
	}
}

// connect reaches the cluster the kubeconfig names, or starts one.
func (s *Session) connect(ctx context.Context) error {
	began := time.Now()
	if s.opts.Kubeconfig == "" {
		release := s.opts.Kubernetes
		if release == (kubeversion.Release{}) {
			var err error
			if release, err = kubeversion.FromEnv(); err != nil {
				return err
			}
		}
		dir, err := controlplane.FindBinaries(release)
		if err != nil {
			fmt.Fprintf(s.opts.Progress, "vigil dev: building the control plane of Kubernetes %s (kube-apiserver, etcd, kubectl) from the Go module proxy: 6 to 12 minutes, once\n", release)
			if dir, err = controlplane.Ensure(ctx, release, s.opts.Progress); err != nil {
				return err
			}
		}
		if s.cp, err = controlplane.Start(controlplane.StartOptions{Release: release, Dir: dir}); err != nil {
			return err
		}
		// kube-apiserver and etcd die with vigil dev, even a SIGKILLed one.
		if s.unreap, err = s.cp.ReapOnExit(); err != nil {
			fmt.Fprintf(s.opts.Progress, "vigil dev: warning: the control plane will outlive a killed vigil dev: %v\n", err)
		}
		s.kubectl = filepath.Join(dir, "kubectl")
		kc, err := s.cp.KubeConfig("vigil-dev", "system:masters")
		if err != nil {
			return err
		}
		s.Kubeconfig = filepath.Join(s.tmp, "kubeconfig")
		if err := os.WriteFile(s.Kubeconfig, kc, 0o600); err != nil {
			return err
		}
		s.Config = s.cp.Config
	} else {
		s.Kubeconfig = s.opts.Kubeconfig
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		rules.Precedence = filepath.SplitList(s.opts.Kubeconfig)
		cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: s.opts.Context}).ClientConfig()
		if err != nil {
			return fmt.Errorf("load kubeconfig %s: %w", s.opts.Kubeconfig, err)
		}
		cfg.QPS, cfg.Burst = 50, 100
		s.Config = cfg
	}
	cs, err := kubernetes.NewForConfig(s.Config)
	if err != nil {
		return err
	}
	s.cs = cs
	s.config = &Materialiser{Client: cs, Plan: s.plan, Dir: filepath.Join(s.tmp, "mounts")}
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		return fmt.Errorf("reach the API server at %s: %w", s.Config.Host, err)
	}
	if s.cp != nil {
		// The user creates what the gates wait for: say how to reach it.
		s.emit(Event{Kind: ClusterUp, Role: "cluster", Text: fmt.Sprintf("embedded control plane up in %s: kube-apiserver %s at %s\nkubeconfig: %s\nreach it with: export KUBECONFIG=%s; %s get namespaces",
			since(began), v.GitVersion, s.Config.Host, s.Kubeconfig, s.Kubeconfig, s.kubectl)})
	} else {
		s.emit(Event{Kind: ClusterUp, Role: "cluster", Text: fmt.Sprintf("kube-apiserver %s at %s (kubeconfig %s)", v.GitVersion, s.Config.Host, s.Kubeconfig)})
	}
	return nil
}

// ensureNamespace creates the module's namespace, as its manifests would.
func (s *Session) ensureNamespace(ctx context.Context) error {
	_, err := s.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.Namespace}}, metav1.CreateOptions{})
	switch {
	case err == nil:
		s.emit(Event{Kind: Log, Role: "cluster", Text: "namespace " + s.Namespace + " created, as the module's manifests would"})
	case apierrors.IsAlreadyExists(err):
	default:
		return fmt.Errorf("create the module's namespace %s: %w", s.Namespace, err)
	}
	return nil
}

func (s *Session) run(ctx context.Context) {
	defer close(s.done)
	err := s.phases(ctx)
	if err == nil {
		err = s.roles(ctx)
	}
	s.cleanup()
	if ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled)) {
		err = nil
	}
	s.err = err
	text := "stopped"
	if err != nil {
		s.emit(Event{Kind: Problem, Role: "dev", Text: err.Error()})
		text = "stopped after a failure"
	}
	s.emit(Event{Kind: Stopped, Role: "dev", Text: fmt.Sprintf("%s after %s", text, since(s.Started))})
}

// kubeletBackoff is the kubelet's delay before restarting a failed
// container, given the last one: 10s, doubling, at most 5m.
func kubeletBackoff(last time.Duration) time.Duration {
	if last <= 0 {
		return 10 * time.Second
	}
	return min(2*last, 5*time.Minute)
}

// phases runs the gate phases in order, one process each.
func (s *Session) phases(ctx context.Context) error {
	for _, ph := range s.plan.Phases {
		role := fmt.Sprintf("phase %d", ph.Phase)
		// The init container starts once what it needs exists.
		env, err := s.containerEnv(ctx, ph.InitContainer, role, ph.Phase)
		if err != nil {
			return err
		}
		began := time.Now()
		s.emit(Event{Kind: PhaseStarted, Role: role, Phase: ph.Phase, Text: fmt.Sprintf("%s started: %s, waited for at once", ph.InitContainer, plural(len(ph.Gates), "gate"))})
		for _, g := range ph.Gates {
			how := "no timeout"
			if g.Timeout > 0 {
				how = "timeout " + g.Timeout.String()
				if g.Fallback {
					how += ", then its fallback"
				} else if g.Optional {
					how += ", then skipped"
				}
			}
			s.emit(Event{Kind: GateWaiting, Role: role, Phase: ph.Phase, Gate: g.Name, Text: fmt.Sprintf("gate %s waits for %s (%s)", g.Name, g.WaitsFor, how)})
		}
		phase := ph.Phase
		// A required gate that runs out of time exits 124; the kubelet
		// restarts the init container with back-off from 10s doubling to 5m,
		// and so does this. Other failures end the session: they need a fix.
		backoff := time.Duration(0)
		for {
			p, err := s.spawn(role, env, func(f map[string]string) (Event, bool) { return gateEvent(phase, f) },
				"gate", "--phase", fmt.Sprint(ph.Phase), "--progress-interval", s.opts.GateProgress.String(), "--handoff-dir", s.handoff)
			if err != nil {
				return err
			}
			select {
			case <-p.done:
			case <-ctx.Done():
				p.stop()
				return ctx.Err()
			}
			if p.err == nil {
				break
			}
			var exit *exec.ExitError
			if !errors.As(p.err, &exit) || exit.ExitCode() != 124 {
				return fmt.Errorf("phase %d failed (%v):\n%s", ph.Phase, p.err, p.tail())
			}
			backoff = kubeletBackoff(backoff)
			s.emit(Event{Kind: Problem, Role: role, Phase: ph.Phase,
				Text: fmt.Sprintf("%s timed out (exit 124); restarting it in %s, as the kubelet would", ph.InitContainer, backoff)})
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				return ctx.Err()
			}
			// A restarted container reads its variables again.
			if env, err = s.containerEnv(ctx, ph.InitContainer, role, ph.Phase); err != nil {
				return err
			}
		}
		s.emit(Event{Kind: PhaseDone, Role: role, Phase: ph.Phase, Text: fmt.Sprintf("%s done in %s", ph.InitContainer, since(began))})
	}
	return nil
}

// refusedAfter finds whether the API server's own policies — the module's
// checks, which it evaluates after the mutating webhooks and before the
// validating ones — refuse a request the module's mutating webhook
// allowed: the timeline must not call it admitted. They are evaluated here
// as the API server evaluates them (policytest), on the object as patched,
// with its Namespace's labels.
func (s *Session) refusedAfter(ctx context.Context, r *Review, req *admissionv1.AdmissionRequest, resp *admissionv1.AdmissionResponse) {
	if len(s.plan.Checks) == 0 {
		return
	}
	req = req.DeepCopy()
	if len(resp.Patch) > 0 {
		p, err := jsonpatch.DecodePatch(resp.Patch)
		if err != nil {
			return
		}
		if req.Object.Raw, err = p.Apply(req.Object.Raw); err != nil {
			return
		}
	}
	var ns map[string]any
	if req.Namespace != "" {
		if got, err := s.cs.CoreV1().Namespaces().Get(ctx, req.Namespace, metav1.GetOptions{}); err == nil {
			if u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(got); err == nil {
				ns = u
			}
		}
	}
	if policy, msg, err := policytest.RefusedByChecks(s.plan, req, ns); err == nil && policy != "" {
		r.RefusedBy, r.RefusedMessage = policy, msg
	}
}

// roles runs admission and the watcher until ctx ends or one of them exits.
func (s *Session) roles(ctx context.Context) error {
	proxy, err := newReviewProxy(s.cs, s.Namespace, s.Module+"-dev-tls")
	if err != nil {
		return err
	}
	defer proxy.close()
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	proxy.serve(addr, func(path string, req *admissionv1.AdmissionRequest, resp *admissionv1.AdmissionResponse) {
		r := review(path, req, resp)
		if r.Allowed && r.Webhook == "mutate" {
			s.refusedAfter(ctx, r, req, resp)
		}
		kind := Admitted
		if !r.Allowed || r.RefusedBy != "" {
			kind = Denied
		}
		s.emit(Event{Kind: kind, Role: "request", Review: r, Text: r.describe()})
	})
	admEnv, err := s.containerEnv(ctx, spec.AdmissionContainer, "admission", 0)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.admission = true
	s.mu.Unlock()
	if err := s.createConfigurations(ctx); err != nil {
		return err
	}
	adm, err := s.spawn("admission", admEnv, admissionEvent,
		"admission", "--addr", addr, "--metrics-addr", "127.0.0.1:0", "--webhook-url", "https://"+proxy.Addr(),
		"--cert-secret", s.Module+"-dev-tls", "--cert-hosts", "127.0.0.1", "--handoff-dir", s.handoff,
		"--shutdown-delay", "100ms", "--registration-check-interval", "5s")
	if err != nil {
		return err
	}
	watcherDone := make(<-chan struct{})
	var w *proc
	if s.plan.HasWatcher() {
		probe, err := freeAddr()
		if err != nil {
			return err
		}
		metrics, err := freeAddr()
		if err != nil {
			return err
		}
		// One replica: no leader election, so a Lease left by an earlier
		// session that was killed never holds this one back.
		env, err := s.containerEnv(ctx, spec.WatcherContainer, "watcher", 0)
		if err != nil {
			return err
		}
		if w, err = s.spawn("watcher", env, watcherEvent, "watcher", "--probe-addr", probe, "--metrics-addr", metrics, "--leader-elect=false"); err != nil {
			return err
		}
		watcherDone = w.done
	}
	select {
	case <-ctx.Done():
		return nil
	case <-adm.done:
		return fmt.Errorf("the admission role exited (%v):\n%s", adm.err, adm.tail())
	case <-watcherDone:
		return fmt.Errorf("the watcher role exited (%v):\n%s", w.err, w.tail())
	}
}

// cleanup removes the webhook configurations first, so the API server stops
// calling the module, and the opt-out guards — what the session created,
// never what a real install owns — then stops its processes and the control
// plane.
func (s *Session) cleanup() {
	s.mu.Lock()
	admission := s.admission
	procs := s.procs
	s.stopping = true
	s.mu.Unlock()
	if admission {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		removed, err := removeSessionObjects(ctx, s.cs, s.Module)
		cancel()
		if err != nil {
			s.emit(Event{Kind: Problem, Role: "dev", Text: "remove the webhook configurations " + s.Module + ": " + err.Error()})
		} else {
			names := make([]string, len(removed))
			for i, o := range removed {
				names[i] = o.String()
			}
			s.emit(Event{Kind: Log, Role: "dev", Text: "removed what this session created: " + strings.Join(names, ", ")})
		}
	}
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Add(1)
		go func() { defer wg.Done(); p.stop() }()
	}
	wg.Wait()
	s.release()
}

// release stops the control plane and removes the session's files.
func (s *Session) release() {
	if s.cp != nil {
		if s.unreap != nil {
			s.unreap()
		}
		if err := s.cp.Stop(); err != nil {
			s.emit(Event{Kind: Problem, Role: "cluster", Text: "stop the control plane: " + err.Error()})
		} else {
			s.emit(Event{Kind: Log, Role: "cluster", Text: "embedded control plane stopped"})
		}
	}
	if s.tmp != "" {
		_ = os.RemoveAll(s.tmp)
	}
}

// proc is one of the module's processes.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error

	mu    sync.Mutex
	lines []string // the last ones, for errors
}

const tailLines = 15

// containerEnv materialises the author's volumes of a container and returns
// its variables; while a required Secret or ConfigMap is missing it waits,
// as the kubelet holds a container until they exist, saying so once.
func (s *Session) containerEnv(ctx context.Context, container, role string, phase int) ([]string, error) {
	said := ""
	for {
		env, err := s.config.Prepare(ctx, container)
		var missing *MissingError
		if !errors.As(err, &missing) {
			return env, err
		}
		if text := missing.Error(); text != said {
			s.emit(Event{Kind: Problem, Role: role, Phase: phase, Text: text + ": waiting for it, as the kubelet would"})
			said = text
		}
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// spawn starts the module's binary with the container's env; parse turns
// its log lines into events.
func (s *Session) spawn(role string, env []string, parse func(map[string]string) (Event, bool), args ...string) (*proc, error) {
	if s.opts.Context != "" {
		args = append(args, "--context", s.opts.Context)
	}
	cmd := exec.Command(s.bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Env = append(cmd.Env, "KUBECONFIG="+s.Kubeconfig, "VIGIL_HANDOFF_DIR="+s.handoff)
	detach(cmd)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	p := &proc{cmd: cmd, done: make(chan struct{})}
	if err := start(cmd); err != nil {
		return nil, fmt.Errorf("start %s: %w", role, err)
	}
	s.mu.Lock()
	s.procs = append(s.procs, p)
	s.mu.Unlock()
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			p.keep(line)
			if f, ok := events.ParseLine(line); ok {
				if e, ok := parse(f); ok && !(e.Kind == Problem && s.isStopping()) {
					s.emit(e)
				}
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	go func() {
		p.err = cmd.Wait()
		_ = pw.Close()
		<-scanned
		close(p.done)
	}()
	return p, nil
}

func (s *Session) isStopping() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopping
}

func (p *proc) keep(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lines = append(p.lines, line)
	if len(p.lines) > tailLines {
		p.lines = p.lines[len(p.lines)-tailLines:]
	}
}

func (p *proc) tail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return "  " + strings.Join(p.lines, "\n  ")
}

// stop asks the process to stop, as the kubelet does, and kills it when it
// does not within ten seconds.
func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	terminate(p.cmd)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		kill(p.cmd)
		<-p.done
	}
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func since(t time.Time) string { return time.Since(t).Round(100 * time.Millisecond).String() }
