package vigiltest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vigilkit/vigil/internal/clusters/podrun"
)

// ModuleOptions say which module InstallModule installs.
type ModuleOptions struct {
	// Dir is the module's main package, as `go build` takes it: "." (the
	// default) for a test in the module's own package.
	Dir string
	// Binary is the module binary, when the test built it already; Dir is
	// then not built.
	Binary string
	// Args are added to the args of the container of that name ("admission",
	// "watcher", "gate-phase-0", ...), after the manifests' own.
	Args map[string][]string
	// Manifests, when set, are what is installed — a chart rendered with its
	// values, say — instead of what `<module> manifests` renders.
	Manifests *Manifests
	// Env ("KEY=value" each) is set when the manifests are rendered and
	// added to every container's environment, as a platform's overlay of
	// them would: for a module that reads its namespace from the
	// environment, say.
	Env []string
	// OnNode runs the module's real pods on the Env's node (Options.Node):
	// its image is built from Dir as `vigil image` builds it and loaded into
	// the node's runtime, the manifests name it by digest, and the kubelet
	// runs each role's pods, its gate phases as init containers. The same
	// calls drive it: StartPhase, RunGates and StartAdmission scale the
	// admission Deployment up and follow its first pod's containers through
	// the API; StartWatcher, the watcher's. Binary is not for it.
	OnNode bool
	// AdmissionReplicas is how many admission pods StartAdmission runs, as
	// the Deployment's replicas behind its Service: each its own process
	// on its own port, and one loopback address in front of them, the
	// --webhook-url of each, that spreads the API server's connections
	// over them a connection at a time, round robin. 1 when zero. Not with
	// OnNode, where the Deployment's replicas are the manifests'.
	AdmissionReplicas int
}

// Module is a module installed from its own manifests into the test's API
// server, its roles run from the manifests' pod specs as a kubelet would
// (see Pod): each as its ServiceAccount, with the module's generated RBAC,
// so that a missing rule fails the test with the rule the API server
// refused. Every object it applied is removed when the test ends, the
// shared Store CRD excepted.
type Module struct {
	// Name is the module's; Namespace the one its manifests install it in.
	Name, Namespace string
	// Binary is the module binary; Manifests, what `manifests` rendered.
	Binary    string
	Manifests *Manifests

	t         testing.TB
	env       *Env
	opts      ModuleOptions
	admission *Pod
	// replicas are the admission pods StartAdmission started.
	replicas []*Pod
	pods     []*Pod
	// node is set for a module a node runs (ModuleOptions.OnNode).
	node *onNode
}

// GateRun is one gate phase, run as its init container.
type GateRun struct {
	// Container is the init container's name (gate-phase-N).
	Container string
	// Output is what the phase logged: each gate's progress, what it last
	// saw and its result.
	Output string
	// Handoff holds the files the phase handed to the main process, by name.
	Handoff map[string]string
	// Took is how long the phase ran.
	Took time.Duration
}

// InstallModule builds the module (unless ModuleOptions.Binary names it),
// renders its manifests, checks their pod specs (CheckPodSpec), and applies
// them. Nothing runs yet: see RunPhase, RunGates, StartAdmission and
// StartWatcher. With ModuleOptions.OnNode it builds the module's image
// instead, and a node runs its pods.
func (e *Env) InstallModule(t testing.TB, opts ModuleOptions) *Module {
	t.Helper()
	dir := opts.Dir
	if dir == "" {
		dir = "."
	}
	bin, image := opts.Binary, ""
	switch {
	case opts.OnNode && e.node == nil:
		t.Fatal("vigiltest: ModuleOptions.OnNode runs the module's pods on a node: start the Env with Options.Node (node.Start of vigiltest/node)")
	case opts.OnNode && bin != "":
		t.Fatal("vigiltest: ModuleOptions.OnNode builds the module's image from Dir: leave Binary empty")
	case opts.OnNode:
		image, bin = e.node.LoadModule(t, dir)
	case bin == "":
		bin = BuildModule(t, dir)
	}
	var plan struct {
		Name      string `json:"module"`
		Namespace string `json:"namespace"`
	}
	cmd := exec.Command(bin, "plan", "-o", "json")
	cmd.Env = append(os.Environ(), opts.Env...)
	out, err := cmd.Output()
	if err == nil {
		err = json.Unmarshal(out, &plan)
	}
	if err != nil {
		t.Fatalf("%s plan -o json: %v", bin, err)
	}
	m := opts.Manifests
	if m == nil {
		ref := image
		if ref == "" {
			ref = "vigiltest.invalid/" + plan.Name + ":test"
		}
		cmd = exec.Command(bin, "manifests", "--image", ref)
		cmd.Env = append(os.Environ(), opts.Env...)
		rendered, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s manifests --image %s: %v", bin, ref, stderrOf(err))
		}
		if m, err = DecodeManifests(rendered); err != nil {
			t.Fatal(err)
		}
	}
	ds, err := m.Deployments()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		checkPodSpec(t, "Deployment "+d.Name, d.Spec.Template.Spec)
	}
	// The namespace is where the manifests install the module — a chart
	// rendered for another namespace than the definition's default, say.
	ns := plan.Namespace
	if len(ds) > 0 {
		ns = ds[0].Namespace
	}
	mod := &Module{Name: plan.Name, Namespace: ns, Binary: bin, Manifests: m, t: t, env: e, opts: opts}
	apply := m
	if e.node != nil {
		// On a node's control plane the kubelet would run every Deployment
		// at once; for the runner too, nothing runs before the test says.
		on := &onNode{image: image, replicas: map[string]int32{}, started: map[string]*Pod{}}
		if apply, err = forNode(m, on, opts); err != nil {
			t.Fatal(err)
		}
		if opts.OnNode {
			mod.node = on
		}
	}
	created, err := e.Apply(t.Context(), apply)
	t.Cleanup(func() { mod.uninstall(created) })
	if err != nil {
		t.Fatal(err)
	}
	return mod
}

func stderrOf(err error) error {
	if ee, ok := err.(*exec.ExitError); ok && len(ee.Stderr) > 0 {
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(string(ee.Stderr)))
	}
	return err
}

// uninstall stops what runs and deletes what Apply created, webhook
// configurations first, so that no later test meets them.
func (m *Module) uninstall(created []*unstructured.Unstructured) {
	for _, p := range m.pods {
		if p.deployment == "" {
			p.Stop()
		}
	}
	ctx := context.Background()
	api := m.env.Clientset.AdmissionregistrationV1()
	_ = api.MutatingWebhookConfigurations().Delete(ctx, m.Name, metav1.DeleteOptions{})
	_ = api.ValidatingWebhookConfigurations().Delete(ctx, m.Name, metav1.DeleteOptions{})
	for i := len(created) - 1; i >= 0; i-- {
		if created[i].GetKind() == "Namespace" {
			continue // namespaces never finish deleting without a controller-manager
		}
		if err := m.env.Client.Delete(ctx, created[i]); err != nil && !apierrors.IsNotFound(err) {
			m.t.Logf("uninstall %s %s: %v", created[i].GetKind(), created[i].GetName(), err)
		}
	}
	if m.env.node != nil {
		ds, _ := m.Manifests.Deployments()
		m.waitGone(ds)
	}
}

// pod prepares a pod of the role's Deployment.
func (m *Module) pod(component string) *Pod {
	m.t.Helper()
	if m.node != nil {
		return m.nodePod(component)
	}
	return m.podOf(m.deployment(component))
}

// deployment is the module's Deployment of component, from its manifests.
func (m *Module) deployment(component string) *appsv1.Deployment {
	m.t.Helper()
	d, err := m.Manifests.Deployment(component)
	if err != nil {
		m.t.Fatal(err)
	}
	if d == nil {
		m.t.Fatalf("module %s has no %s Deployment in its manifests", m.Name, component)
	}
	return d
}

func (m *Module) podOf(d *appsv1.Deployment) *Pod {
	m.t.Helper()
	p := m.env.NewPod(m.t, d.Namespace, d.Spec.Template, PodOptions{Binary: m.Binary, Args: m.opts.Args, Env: m.opts.Env})
	m.pods = append(m.pods, p)
	return p
}

// AdmissionPod is the module's admission pod, whose init containers are its
// gate phases: the one StartPhase, RunPhase, RunGates and StartAdmission
// run. Its Name is what the gates' Events on their Pod name.
func (m *Module) AdmissionPod() *Pod { return m.admissionPod() }

// AdmissionPods are the admission pods StartAdmission started, the first
// AdmissionPod: as many as ModuleOptions.AdmissionReplicas.
func (m *Module) AdmissionPods() []*Pod {
	if m.replicas == nil && m.admission != nil {
		return []*Pod{m.admission}
	}
	return m.replicas
}

// admissionPod is the admission pod, whose init containers are the gate
// phases.
func (m *Module) admissionPod() *Pod {
	if m.admission == nil {
		m.admission = m.pod("admission")
	}
	return m.admission
}

// Phases is how many gate phases the module has: the init containers of its
// admission Deployment.
func (m *Module) Phases() int {
	m.t.Helper()
	d, err := m.Manifests.Deployment("admission")
	if err != nil {
		m.t.Fatal(err)
	}
	if d == nil {
		return 0
	}
	return len(d.Spec.Template.Spec.InitContainers)
}

// StartPhase starts the next gate phase, which must be phase n (phases run
// in order, as init containers do), and returns its process, running: for a
// test that creates what the phase waits for. Wait for it with WaitOK.
//
// On a node the kubelet starts the phase when the one before has exited 0;
// the Process follows its container in the first admission pod.
func (m *Module) StartPhase(n int) *Process {
	m.t.Helper()
	p := m.admissionPod()
	if p.Inited() != n {
		m.t.Fatalf("phase %d: phases run in order, and the next one is %d (of %d)", n, p.Inited(), p.InitContainers())
	}
	if m.node != nil {
		p.init++
		return p.follow(p.spec.InitContainers[n].Name)
	}
	return p.StartInit()
}

// RunPhase runs the next gate phase, which must be phase n, until it ends or
// timeout passes, and returns what it did. A phase that fails or times out
// fails the test with its output.
func (m *Module) RunPhase(n int, timeout time.Duration) GateRun {
	m.t.Helper()
	began := time.Now()
	proc := m.StartPhase(n)
	if code := proc.Wait(m.t, timeout); code != 0 {
		m.t.Fatalf("gate phase %d (%s) exited %d:\n%s", n, proc.container, code, proc.Output)
	}
	return GateRun{Container: proc.container, Output: proc.Output.String(), Handoff: m.handoff(m.admissionPod()), Took: time.Since(began)}
}

// RunGates runs the gate phases not run yet, in order.
func (m *Module) RunGates(timeout time.Duration) []GateRun {
	m.t.Helper()
	var out []GateRun
	for p := m.admissionPod(); p.Inited() < p.InitContainers(); {
		out = append(out, m.RunPhase(p.Inited(), timeout))
	}
	return out
}

// Handoff is what the gate phases run so far handed to the main process:
// the files of the admission pod's handoff folder, by name.
func (m *Module) Handoff() map[string]string { return m.handoff(m.admissionPod()) }

// handoff reads the files in the pod's handoff folder.
func (m *Module) handoff(p *Pod) map[string]string {
	out := map[string]string{}
	for _, c := range p.spec.InitContainers {
		for _, e := range c.Env {
			if e.Name != "VIGIL_HANDOFF_DIR" {
				continue
			}
			dir := podrun.Local(c, p.Root, e.Value)
			if m.node != nil {
				dir = m.nodeDir(p, c, e.Value)
			}
			entries, _ := os.ReadDir(dir)
			for _, f := range entries {
				if data, err := os.ReadFile(filepath.Join(dir, f.Name())); err == nil && !f.IsDir() {
					out[f.Name()] = string(data)
				}
			}
			return out
		}
	}
	return out
}

// StartAdmission runs the gate phases not run yet, then the admission
// container (with --shutdown-delay 0s), and waits until its webhooks are
// registered and enforced — Ignore, then the canary, then the failure
// policy, as in production — within timeout. It returns the pod, running.
// With ModuleOptions.AdmissionReplicas, a second call starts again the
// replicas that were stopped, behind the same address, and leaves the
// running ones as they are.
//
// On a node it waits for every admission replica to be Ready too, and the
// pod's Ports are its pod IP's.
func (m *Module) StartAdmission(timeout time.Duration) *Pod {
	m.t.Helper()
	p := m.admissionPod()
	var mains []*Process
	if m.node != nil {
		if m.opts.AdmissionReplicas > 1 {
			m.t.Fatalf("module %s: ModuleOptions.AdmissionReplicas is not for OnNode, where the admission Deployment's replicas are the manifests'", m.Name)
		}
		m.RunGates(timeout)
		mains = append(mains, p.follow("admission"))
		m.waitRolledOut("admission", p, timeout)
	} else {
		// A second start brings back the replicas a test stopped, behind
		// the same address, and leaves the running ones alone.
		pods := m.replicas
		if pods == nil {
			pods = []*Pod{p}
			for len(pods) < m.opts.AdmissionReplicas {
				pods = append(pods, m.podOf(m.deployment("admission")))
			}
			if len(pods) > 1 {
				backends := make([]string, len(pods))
				for i, r := range pods {
					backends[i] = r.Ports["https"]
				}
				svc := newService(m.t, backends)
				for _, r := range pods {
					r.webhookURL = "https://" + svc.Addr()
				}
			}
		}
		for _, r := range pods {
			if running(r.Process("admission")) {
				mains = append(mains, r.Process("admission"))
				continue
			}
			if m.opts.Args == nil || m.opts.Args["admission"] == nil {
				r.opts.Args = map[string][]string{"admission": {"--shutdown-delay", "0s"}}
				for k, v := range m.opts.Args {
					r.opts.Args[k] = v
				}
			}
			mains = append(mains, r.Start(timeout)[0])
		}
		m.replicas = pods
	}
	deadline := time.Now().Add(timeout)
	for {
		state, err := m.registered()
		if err == nil && state == "enforced" && m.replicasReady() {
			return p
		}
		for _, main := range mains {
			select {
			case <-main.Exited():
				m.t.Fatalf("the admission container exited %d before its webhooks were enforced:\n%s", main.ExitCode(), main.Output)
			default:
			}
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("the admission webhooks of %s were not enforced within %s (registration state %q, %v):\n%s", m.Name, timeout, state, err, mains[0].Output)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Output is what the module's processes running the named container
// ("admission", "watcher", "gate-phase-0", ...) have written so far.
func (m *Module) Output(container string) string {
	if m.node != nil {
		return m.nodeOutput(container)
	}
	var b strings.Builder
	for _, p := range m.pods {
		for _, proc := range p.procs {
			if proc.container == container {
				b.WriteString(proc.Output.String())
			}
		}
	}
	return b.String()
}

// replicasReady reports whether every admission replica answers its
// readiness probe (/readyz over HTTPS, its certificate not verified, as the
// kubelet probes) when there are several: as a Service's endpoints, the
// replicas StartAdmission returns are Ready. Any of them may be the one
// that registered the webhooks. One replica's readiness is its webhooks'
// registration.
func (m *Module) replicasReady() bool {
	if len(m.replicas) < 2 {
		return true
	}
	for _, r := range m.replicas {
		if httpsOK("https://"+r.Ports["https"]+"/readyz") != nil {
			return false
		}
	}
	return true
}

// registered is the state both webhook configurations' registration records
// agree on, or "" while they differ.
func (m *Module) registered() (string, error) {
	ctx := m.t.Context()
	api := m.env.Clientset.AdmissionregistrationV1()
	mut, err := api.MutatingWebhookConfigurations().Get(ctx, m.Name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	val, err := api.ValidatingWebhookConfigurations().Get(ctx, m.Name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	state := func(o metav1.Object) string {
		var rec struct {
			State string `json:"state"`
		}
		_ = json.Unmarshal([]byte(o.GetAnnotations()["vigil.dev/registration"]), &rec)
		return rec.State
	}
	if s := state(mut); s == state(val) {
		return s, nil
	}
	return "", nil
}

// StartWatcher starts the watcher container, and waits until it reports
// ready on its probe port within timeout (on a node: until every watcher
// replica is Ready, which its readiness probe on /readyz decides).
func (m *Module) StartWatcher(timeout time.Duration) *Pod {
	m.t.Helper()
	p := m.pod("watcher")
	if m.node != nil {
		p.follow("watcher")
		m.waitRolledOut("watcher", p, timeout)
		return p
	}
	procs := p.Start(timeout)
	addr := p.Ports["probes"]
	if addr == "" {
		return p
	}
	deadline := time.Now().Add(timeout)
	for {
		err := httpOK("http://" + addr + "/readyz")
		if err == nil {
			break
		}
		select {
		case <-procs[0].Exited():
			m.t.Fatalf("the watcher exited %d before it was ready:\n%s", procs[0].ExitCode(), procs[0].Output)
		default:
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("the watcher of %s was not ready within %s (%v); what it said (a rule missing from its RBAC shows as \"forbidden\"):\n%s", m.Name, timeout, err, procs[0].Output)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return p
}

// running reports whether proc has been started and has not exited.
func running(proc *Process) bool {
	if proc == nil {
		return false
	}
	select {
	case <-proc.Exited():
		return false
	default:
		return true
	}
}
