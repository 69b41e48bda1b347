package cli_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vigilkit/vigil/internal/commands/cmdutil"
	"github.com/vigilkit/vigil/internal/commands/dev"
	"github.com/vigilkit/vigil/internal/serving/registration"
	"github.com/vigilkit/vigil/internal/testsupport/bench"
	"github.com/vigilkit/vigil/vigiltest"
)

// vigil dev leaves nothing behind when it is killed: its processes die with
// it, and what it created in the cluster — webhook configurations that now
// point at a proxy that is gone, so that every create they match fails — is
// removed by `vigil dev --clean` and by the next vigil dev of the module,
// while what a real install owns is never touched.
func TestDevKilledLeavesNothingBehind(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the module's processes die with a killed vigil dev on Linux only (Pdeathsig)")
	}
	kubeconfig, err := adminKubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	ns := env.Namespace(t)
	cs := env.Clientset
	api := cs.AdmissionregistrationV1()
	bin := filepath.Join(t.TempDir(), "vigil")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/vigilkit/vigil/cmd/vigil").CombinedOutput(); err != nil {
		t.Fatalf("go build vigil: %v\n%s", err, out)
	}
	module, err := filepath.Abs(filepath.Join("testdata", "dev", "leftover"))
	if err != nil {
		t.Fatal(err)
	}
	const name, moduleNS, guard = "leftover", "leftover-system", "leftover-checks-opt-out"
	// Whatever happens, the tests after this one must not meet the module's
	// webhooks.
	t.Cleanup(func() {
		ctx := context.Background()
		_ = api.MutatingWebhookConfigurations().Delete(ctx, name, metav1.DeleteOptions{})
		_ = api.ValidatingWebhookConfigurations().Delete(ctx, name, metav1.DeleteOptions{})
		_ = api.ValidatingAdmissionPolicyBindings().Delete(ctx, guard, metav1.DeleteOptions{})
		_ = api.ValidatingAdmissionPolicies().Delete(ctx, guard, metav1.DeleteOptions{})
	})
	ctx := context.Background()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: moduleNS}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	gateOpen := func() {
		t.Helper()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "go", Namespace: moduleNS}}
		if _, err := cs.CoreV1().ConfigMaps(moduleNS).Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	n := 0
	create := func(labels map[string]string) error {
		n++
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", n), Namespace: ns, Labels: labels}}
		_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
		return err
	}
	// The sessions' temporary folders, those of killed ones included, go here.
	tmp := t.TempDir()
	vigilDev := func(args ...string) *vigiltest.Process {
		return vigiltest.StartProcess(t, []string{"LEFTOVER_NAMESPACE=" + ns, "TMPDIR=" + tmp}, bin,
			append([]string{"dev", module, "--kubeconfig", kubeconfig, "--color", "never", "--gate-progress", "200ms"}, args...)...)
	}
	// sessionObjects are what carries vigil dev's label.
	sessionObjects := func() []string {
		t.Helper()
		sel := metav1.ListOptions{LabelSelector: dev.SessionLabel + "=" + name}
		var found []string
		mut, err1 := api.MutatingWebhookConfigurations().List(ctx, sel)
		val, err2 := api.ValidatingWebhookConfigurations().List(ctx, sel)
		pol, err3 := api.ValidatingAdmissionPolicies().List(ctx, sel)
		bnd, err4 := api.ValidatingAdmissionPolicyBindings().List(ctx, sel)
		if err := errors.Join(err1, err2, err3, err4); err != nil {
			t.Fatal(err)
		}
		for _, o := range mut.Items {
			found = append(found, "MutatingWebhookConfiguration "+o.Name)
		}
		for _, o := range val.Items {
			found = append(found, "ValidatingWebhookConfiguration "+o.Name)
		}
		for _, o := range pol.Items {
			found = append(found, "ValidatingAdmissionPolicy "+o.Name)
		}
		for _, o := range bnd.Items {
			found = append(found, "ValidatingAdmissionPolicyBinding "+o.Name)
		}
		slices.Sort(found)
		return found
	}
	all := []string{
		"MutatingWebhookConfiguration " + name, "ValidatingAdmissionPolicy " + guard,
		"ValidatingAdmissionPolicyBinding " + guard, "ValidatingWebhookConfiguration " + name,
	}
	// killEnforcing runs vigil dev until its webhooks are enforced, SIGKILLs
	// it, and checks that its processes died with it and that what it left
	// refuses every create its webhooks match. It returns the session's
	// temporary folder, which a SIGKILL leaves.
	killEnforcing := func() string {
		t.Helper()
		gateOpen()
		d := vigilDev()
		d.WaitOutput(t, "webhooks enforced with failurePolicy Fail", 2*time.Minute)
		d.WaitOutput(t, "ready: 1 binding", time.Minute)
		if err := create(map[string]string{"deny": "true"}); err == nil || !strings.Contains(err.Error(), "is labelled deny") {
			t.Fatalf("a ConfigMap labelled deny was not refused by the module: %v", err)
		}
		kids := children(t, d.Pid())
		reap(t, kids)
		wantRoles(t, kids, "admission", "watcher")
		if err := d.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		d.Wait(t, 10*time.Second)
		vigiltest.Eventually(t, 10*time.Second, func() error { return aliveChildren(kids) })
		if got := sessionObjects(); !slices.Equal(got, all) {
			t.Fatalf("a killed vigil dev left %q, want %q", got, all)
		}
		if err := create(nil); err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
			t.Fatalf("with a killed vigil dev's configurations in place, a create got %v; want it refused, calling the webhook failed", err)
		}
		dir := filepath.Dir(strings.Fields(kids[0].cmdline)[0])
		if _, err := os.Stat(dir); err != nil || filepath.Dir(dir) != tmp {
			t.Fatalf("the killed session's temporary folder %s: %v", dir, err)
		}
		return dir
	}
	gone := func(dir string) {
		t.Helper()
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the temporary folder %s of a killed vigil dev is still there (%v)", dir, err)
		}
	}

	// A killed session, then `vigil dev --clean`.
	dir := killEnforcing()
	c := vigilDev("--clean")
	c.WaitOK(t, 2*time.Minute)
	gone(dir)
	for _, o := range all {
		if !strings.Contains(c.Output.String(), "removed "+o+", left by vigil dev") {
			t.Errorf("vigil dev --clean does not report removing %s:\n%s", o, c.Output)
		}
	}
	if got := sessionObjects(); len(got) != 0 {
		t.Fatalf("after vigil dev --clean, %q remain", got)
	}
	if err := create(nil); err != nil {
		t.Fatalf("a create after vigil dev --clean: %v", err)
	}

	// A killed session, then a new one: it removes what the killed one left
	// before anything else, here while its gate phase waits.
	dir = killEnforcing()
	if err := cs.CoreV1().ConfigMaps(moduleNS).Delete(ctx, "go", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	d := vigilDev()
	d.WaitOutput(t, "removed MutatingWebhookConfiguration leftover, left by an earlier vigil dev session", 2*time.Minute)
	d.WaitOutput(t, "gate configmap-go waiting", time.Minute)
	gone(dir)
	if got := sessionObjects(); len(got) != 0 {
		t.Fatalf("a new vigil dev left %q of the killed one in place", got)
	}
	if err := create(nil); err != nil {
		t.Fatalf("a create once a new vigil dev removed what the killed one left: %v", err)
	}
	kids := children(t, d.Pid())
	reap(t, kids)
	wantRoles(t, kids, "gate --phase 0")
	if err := d.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	d.Wait(t, 10*time.Second)
	vigiltest.Eventually(t, 10*time.Second, func() error { return aliveChildren(kids) })

	// A real install's configurations are never touched, and vigil dev does
	// not run over them.
	mut, val := registration.Bootstrap(name)
	if _, err := api.MutatingWebhookConfigurations().Create(ctx, mut, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := api.ValidatingWebhookConfigurations().Create(ctx, val, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c = vigilDev("--clean")
	c.WaitOK(t, 2*time.Minute)
	if !strings.Contains(c.Output.String(), "kept webhook configurations leftover: vigil dev did not create them") {
		t.Errorf("vigil dev --clean does not report keeping a real install's configurations:\n%s", c.Output)
	}
	d = vigilDev()
	if code := d.Wait(t, 2*time.Minute); code != cmdutil.ExitFailed || !strings.Contains(d.Output.String(), "vigil dev did not create them") {
		t.Errorf("vigil dev over a real install exited %d, want %d refusing it:\n%s", code, cmdutil.ExitFailed, d.Output)
	}
	if _, err := api.MutatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{}); err != nil {
		t.Errorf("a real install's MutatingWebhookConfiguration: %v", err)
	}
	if _, err := api.ValidatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{}); err != nil {
		t.Errorf("a real install's ValidatingWebhookConfiguration: %v", err)
	}
	if t.Failed() {
		return
	}

	// Ctrl-C removes what the session created, and stops its processes.
	if err := errors.Join(api.MutatingWebhookConfigurations().Delete(ctx, name, metav1.DeleteOptions{}),
		api.ValidatingWebhookConfigurations().Delete(ctx, name, metav1.DeleteOptions{})); err != nil {
		t.Fatal(err)
	}
	gateOpen()
	d = vigilDev()
	d.WaitOutput(t, "webhooks enforced with failurePolicy Fail", 2*time.Minute)
	kids = children(t, d.Pid())
	reap(t, kids)
	if got := sessionObjects(); !slices.Equal(got, all) {
		t.Fatalf("a running vigil dev created %q, want %q", got, all)
	}
	if err := d.Cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	d.WaitOK(t, 30*time.Second)
	if !strings.Contains(d.Output.String(), "removed what this session created: "+all[0]) {
		t.Errorf("vigil dev does not report what it removed on Ctrl-C:\n%s", d.Output)
	}
	if err := aliveChildren(kids); err != nil {
		t.Error(err)
	}
	if got := sessionObjects(); len(got) != 0 {
		t.Errorf("after Ctrl-C, vigil dev left %q", got)
	}
	if err := create(nil); err != nil {
		t.Errorf("a create after vigil dev stopped: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "vigil-dev-*")); len(left) != 0 {
		t.Errorf("temporary folders of vigil dev remain: %q", left)
	}
}

// child is a process vigil dev started, as /proc shows it.
type child struct {
	pid     int
	cmdline string
}

// children are the processes whose parent is pid.
func children(t *testing.T, pid int) []child {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []child
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if bench.ProcStatus(p, "PPid") != int64(pid) {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		out = append(out, child{p, strings.Join(strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00"), " ")})
	}
	return out
}

// reap kills, when the test ends, those of kids that still run: a test that
// failed must not leave them behind either.
func reap(t *testing.T, kids []child) {
	t.Cleanup(func() {
		for _, k := range kids {
			if aliveChildren([]child{k}) != nil {
				_ = syscall.Kill(k.pid, syscall.SIGKILL)
			}
		}
	})
}

// wantRoles fails the test unless kids are the module's processes in these
// roles, one each.
func wantRoles(t *testing.T, kids []child, roles ...string) {
	t.Helper()
	if len(kids) != len(roles) {
		t.Fatalf("vigil dev runs %d processes, want %d (%q): %v", len(kids), len(roles), roles, kids)
	}
	for _, r := range roles {
		if !slices.ContainsFunc(kids, func(c child) bool { return strings.Contains(c.cmdline, " "+r+" ") }) {
			t.Fatalf("no process of vigil dev runs %q: %v", r, kids)
		}
	}
}

// aliveChildren names the processes of kids that still run: neither gone nor
// a zombie waiting for its new parent to reap it.
func aliveChildren(kids []child) error {
	var running []string
	for _, k := range kids {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", k.pid))
		if err != nil {
			continue
		}
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) > 0 && fields[0] == "Z" {
			continue
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", k.pid))
		if len(cmdline) > 0 && !strings.HasPrefix(strings.ReplaceAll(string(cmdline), "\x00", " "), k.cmdline) {
			continue // the pid was reused
		}
		running = append(running, fmt.Sprintf("%d (%s)", k.pid, k.cmdline))
	}
	if len(running) > 0 {
		return fmt.Errorf("still running after vigil dev was killed: %s", strings.Join(running, ", "))
	}
	return nil
}
