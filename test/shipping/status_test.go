package shipping

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/internal/commands/cli"
	"github.com/vigilkit/vigil/internal/commands/modcli"
	"github.com/vigilkit/vigil/internal/operating/status"
	"github.com/vigilkit/vigil/internal/testsupport/testkit"
	"github.com/vigilkit/vigil/vigiltest"
)

func statusClients(t *testing.T, kube kubernetes.Interface, dyn dynamic.Interface) status.Clients {
	t.Helper()
	return status.Clients{Kube: kube, Dynamic: dyn}
}

// A module installed from its manifests, its admission role registering
// its webhooks: `vigil status` reports its version, definition, replicas and
// the registration as the module wrote it; as a cluster viewer (the view
// ClusterRole), it reports the module and says which rights it lacks for
// the rest; -o json carries the schema's version.
func TestStatusReportsAnInstalledModule(t *testing.T) {
	ctx := t.Context()
	home, apps := env.Namespace(t), env.Namespace(t)
	name := "status-" + home[len(home)-6:]
	m := vigil.NewModule(name, vigil.Options{Namespace: home, Version: "1.4.0"})
	policies := m.Capability("policies", vigil.InNamespaces(apps))
	vigil.When(policies, &corev1.Pod{}).IsCreated().Named("no-privileged").Validate(testkit.DenyPrivileged)

	code, rendered := testkit.RunCapture(t, m, "manifests", "--image", "example.invalid/"+name+":1.4.0")
	if code != 0 {
		t.Fatalf("manifests exit %d:\n%s", code, rendered)
	}
	mf, err := vigiltest.DecodeManifests([]byte(rendered))
	if err != nil {
		t.Fatal(err)
	}
	created, err := env.Apply(ctx, mf)
	t.Cleanup(func() {
		for _, u := range created {
			if u.GetNamespace() == "" && u.GetKind() != "Namespace" && u.GetKind() != "CustomResourceDefinition" {
				_ = env.Client.Delete(context.Background(), u)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	_, certDir := testkit.ServingDir(t)
	addr := vigiltest.FreeAddr(t)
	t.Setenv(modcli.EnvHandoffDir, t.TempDir())
	testkit.RunAdmission(t, m, addr, "--cert-dir", certDir, "--kubeconfig", kubeconfig(t), "--shutdown-delay", "0s", "--webhook-url", "https://"+addr)

	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	admin := statusClients(t, env.Clientset, dyn)
	var r *status.Report
	vigiltest.Eventually(t, 60*time.Second, func() error {
		r, err = status.Collect(ctx, admin, status.Options{Module: name})
		if err != nil {
			return err
		}
		if len(r.Modules) != 1 {
			return fmt.Errorf("%d modules named %s, want 1", len(r.Modules), name)
		}
		for _, c := range r.Modules[0].Registration {
			if c.Kind == "validating" && c.State == "enforced" {
				return nil
			}
		}
		return fmt.Errorf("registration %+v: want the validating configuration enforced", r.Modules[0].Registration)
	})
	got := r.Modules[0]
	if got.Namespace != home || got.Version != "1.4.0" || got.Spec == "" || len(got.Roles) == 0 || got.Roles[0].Name != "admission" || got.Roles[0].Desired != 2 {
		t.Errorf("module %+v: want namespace %s, version 1.4.0, a definition and the admission role of 2 replicas", got, home)
	}
	if len(r.Missing) != 0 {
		t.Errorf("as an admin, missing rights %v: want none", r.Missing)
	}
	var text bytes.Buffer
	if err := status.Write(&text, r, time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"module " + name + " (namespace " + home + ")", "0/2 ready", "validating " + name, "enforced by version 1.4.0", "policies.validate." + name} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, text.String())
		}
	}

	// A cluster viewer: what the view ClusterRole grants of what status
	// reads (a test API server has no controller to aggregate view itself).
	viewer := "viewer-" + name
	cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: viewer}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods", "pods/log", "events", "namespaces", "services"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments", "statefulsets", "daemonsets"}, Verbs: []string{"get", "list", "watch"}},
	}}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: viewer},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: viewer},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: viewer}}}
	for _, o := range []client.Object{cr, crb} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
	vcs, err := kubernetes.NewForConfig(env.AsUserConfig(viewer))
	if err != nil {
		t.Fatal(err)
	}
	vdyn, err := dynamic.NewForConfig(env.AsUserConfig(viewer))
	if err != nil {
		t.Fatal(err)
	}
	vigiltest.Eventually(t, 30*time.Second, func() error {
		r, err = status.Collect(ctx, statusClients(t, vcs, vdyn), status.Options{Module: name})
		if err != nil {
			return err
		}
		if len(r.Modules) != 1 {
			return fmt.Errorf("as a viewer: %d modules, want 1 (missing %v)", len(r.Modules), r.Missing)
		}
		return nil
	})
	missing := strings.Join(r.Missing, "\n")
	if !strings.Contains(missing, "list mutatingwebhookconfigurations.admissionregistration.k8s.io") || !strings.Contains(missing, "list validatingwebhookconfigurations") {
		t.Errorf("as a viewer, missing %q: want the webhook configurations named", missing)
	}
	if r.Modules[0].Roles[0].Desired != 2 {
		t.Errorf("as a viewer: roles %+v", r.Modules[0].Roles)
	}

	// The command, -o json.
	var out, errOut bytes.Buffer
	if code := cli.Execute(ctx, []string{"status", name, "-o", "json", "--kubeconfig", kubeconfig(t)}, &out, &errOut); code != 0 {
		t.Fatalf("vigil status exit %d: %s", code, errOut.String())
	}
	var doc status.Report
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil || doc.SchemaVersion != status.SchemaVersion || len(doc.Modules) != 1 || doc.Modules[0].Name != name {
		t.Errorf("vigil status -o json: %v, %+v", err, doc)
	}
	// As a kubectl plugin: vigil linked as kubectl-vigil on the PATH.
	plugin := kubectlPlugin(t)
	kubectlOut, err := plugin("vigil", "status", name, "-o", "json", "--kubeconfig", kubeconfig(t))
	doc = status.Report{}
	if err != nil || json.Unmarshal(kubectlOut, &doc) != nil || len(doc.Modules) != 1 || doc.Modules[0].Name != name {
		t.Errorf("kubectl vigil status %s -o json: %v\n%s", name, err, kubectlOut)
	}
	if help, err := plugin("vigil", "status", "--help"); err != nil || !strings.Contains(string(help), "kubectl vigil status [MODULE]") {
		t.Errorf("kubectl vigil status --help: %v; want its usage to say kubectl vigil status:\n%s", err, help)
	}
	if code := cli.Execute(ctx, []string{"status", "no-such-module", "--kubeconfig", kubeconfig(t)}, &out, &errOut); code == 0 || !strings.Contains(errOut.String(), "no-such-module") {
		t.Errorf("vigil status of a module not installed: exit %d, %q; want an error naming it", code, errOut.String())
	}

	// --watch redraws when the status changes, as the API server announces
	// it (the interval, for what no watch announces, is too long to
	// matter): the admission Deployment scaled to 3.
	watchCtx, stop := context.WithCancel(ctx)
	defer stop()
	watched := &vigiltest.Buffer{}
	done := make(chan int, 1)
	go func() {
		done <- cli.Execute(watchCtx, []string{"status", name, "--watch", "--interval", "1h", "--kubeconfig", kubeconfig(t)}, watched, watched)
	}()
	vigiltest.Eventually(t, 30*time.Second, func() error {
		if !strings.Contains(watched.String(), "0/2 ready") {
			return fmt.Errorf("no first drawing yet: %q", watched.String())
		}
		return nil
	})
	scale := []byte(`{"spec":{"replicas":3}}`)
	// The watches' first lists are in, and read (at most once a second):
	// they draw nothing new.
	time.Sleep(2 * time.Second)
	scaled := time.Now()
	if _, err := env.Clientset.AppsV1().Deployments(home).Patch(ctx, name, types.MergePatchType, scale, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(watched.String(), "0/3 ready") {
		if time.Since(scaled) > 30*time.Second {
			t.Fatalf("vigil status --watch not redrawn 30 s after the scale: %q", watched.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Printf("status: watch_redraw_after_change_s=%.2f\n", time.Since(scaled).Seconds())
	time.Sleep(time.Second) // nothing changes: no more drawings
	stop()
	if code := <-done; code != 0 {
		t.Errorf("vigil status --watch exit %d", code)
	}
	if n := strings.Count(watched.String(), "\x1b[H\x1b[2J"); n != 2 {
		t.Errorf("vigil status --watch drew %d times, want 2 (once, then after the one change)", n)
	}
}

// kubectlPlugin builds vigil, links it as kubectl-vigil in a folder on the
// PATH and returns a function that runs kubectl (the control plane's, else
// the PATH's) with args.
func kubectlPlugin(t *testing.T) func(args ...string) ([]byte, error) {
	t.Helper()
	kubectl := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		if kubectl, err = exec.LookPath("kubectl"); err != nil {
			t.Fatalf("no kubectl beside the control plane (KUBEBUILDER_ASSETS=%q) nor on the PATH: run hack/control-plane.sh", os.Getenv("KUBEBUILDER_ASSETS"))
		}
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "vigil")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/vigilkit/vigil/cmd/vigil").CombinedOutput(); err != nil {
		t.Fatalf("go build vigil: %v\n%s", err, out)
	}
	if err := os.Symlink(bin, filepath.Join(dir, cli.PluginName)); err != nil {
		t.Fatal(err)
	}
	return func(args ...string) ([]byte, error) {
		cmd := exec.Command(kubectl, args...)
		cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return out, fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, stderr.String())
		}
		return out, nil
	}
}
