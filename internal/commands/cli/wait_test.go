package cli_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/vigilkit/vigil/internal/commands/cli"
	"github.com/vigilkit/vigil/internal/commands/cmdutil"
	"github.com/vigilkit/vigil/vigiltest"
)

// env is the control plane every test of `vigil wait` runs against.
var env *vigiltest.Env

// kubeconfigDir holds the admin kubeconfig the tests give vigil and kubectl.
var kubeconfigDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "vigil-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	kubeconfigDir = dir
	code := vigiltest.Run(m, vigiltest.Options{}, &env)
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// adminKubeconfig writes the admin kubeconfig once: env.KubeConfig adds a
// user to the control plane and is not safe for concurrent use.
var adminKubeconfig = sync.OnceValues(func() (string, error) {
	data, err := env.KubeConfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(kubeconfigDir, "kubeconfig")
	return path, os.WriteFile(path, data, 0o600)
})

// gizmoCRD is a namespaced custom resource with a status subresource, so that
// spec changes raise metadata.generation and status is written separately.
const gizmoCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gizmos.wait.vigil.dev
spec:
  group: wait.vigil.dev
  scope: Namespaced
  names:
    plural: gizmos
    singular: gizmo
    kind: Gizmo
    listKind: GizmoList
    shortNames: [gz]
  versions:
    - name: v1
      served: true
      storage: true
      subresources:
        status: {}
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              x-kubernetes-preserve-unknown-fields: true
            status:
              type: object
              x-kubernetes-preserve-unknown-fields: true
`

// crdYAML is a minimal namespaced CRD named plural.group.
func crdYAML(plural, singular, kind, group string) []byte {
	return fmt.Appendf(nil, `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: %[1]s.%[4]s
spec:
  group: %[4]s
  scope: Namespaced
  names:
    plural: %[1]s
    singular: %[2]s
    kind: %[3]s
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          x-kubernetes-preserve-unknown-fields: true
`, plural, singular, kind, group)
}

func installGizmos(t *testing.T) {
	t.Helper()
	if err := env.InstallCRDYAML([]byte(gizmoCRD)); err != nil {
		t.Fatal(err)
	}
}

type result struct {
	code           int
	stdout, stderr string
	took           time.Duration
	ended          time.Time
}

func (r result) String() string {
	return fmt.Sprintf("exit %d after %s\nstdout:\n%s\nstderr:\n%s", r.code, r.took.Round(time.Millisecond), r.stdout, r.stderr)
}

// kubeconfigFile returns the admin kubeconfig file.
func kubeconfigFile(t *testing.T) string {
	t.Helper()
	path, err := adminKubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// vigilWait runs `vigil wait args...` as Execute does, for parallel tests.
func vigilWait(t *testing.T, kubeconfig string, args ...string) result {
	t.Helper()
	return vigilWaitErr(t, kubeconfig, nil, args...)
}

// vigilWaitErr is vigilWait writing stderr to errOut as well, so that a test
// can watch it while the wait runs.
//
// It runs the root command and maps its error to the exit code the way
// Execute does, without Execute's process-wide logger setup: klog.SetLogger
// is not safe while other goroutines use client-go, as parallel tests do.
// The tests of Execute itself (vigilExecute) do not run in parallel.
func vigilWaitErr(t *testing.T, kubeconfig string, errOut *vigiltest.Buffer, args ...string) result {
	t.Helper()
	var out vigiltest.Buffer
	if errOut == nil {
		errOut = &vigiltest.Buffer{}
	}
	root := cli.NewRootCommand(&out, errOut)
	root.SetArgs(append([]string{"wait", "--kubeconfig", kubeconfig}, args...))
	began := time.Now()
	err := root.ExecuteContext(t.Context())
	code := cmdutil.ExitCode(errOut, err)
	return result{code: code, stdout: out.String(), stderr: errOut.String(), took: time.Since(began), ended: time.Now()}
}

// vigilExecute runs `vigil wait args...` through Execute, exactly as the
// binary does. Only tests that do not run in parallel may call it (see
// vigilWaitErr).
func vigilExecute(t *testing.T, kubeconfig string, args ...string) result {
	t.Helper()
	var out, errOut vigiltest.Buffer
	full := append([]string{"wait", "--kubeconfig", kubeconfig}, args...)
	began := time.Now()
	code := cli.Execute(t.Context(), full, &out, &errOut)
	return result{code: code, stdout: out.String(), stderr: errOut.String(), took: time.Since(began), ended: time.Now()}
}

// goWait starts vigilWait in a goroutine.
func goWait(t *testing.T, kubeconfig string, errOut *vigiltest.Buffer, args ...string) <-chan result {
	t.Helper()
	ch := make(chan result, 1)
	go func() { ch <- vigilWaitErr(t, kubeconfig, errOut, args...) }()
	return ch
}

// kubectlWait runs the real kubectl wait.
func kubectlWait(t *testing.T, kubeconfig string, args ...string) result {
	t.Helper()
	full := append([]string{"wait", "--kubeconfig", kubeconfig, "--cache-dir", t.TempDir()}, args...)
	cmd := exec.CommandContext(t.Context(), filepath.Join(env.BinDir, "kubectl"), full...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	began := time.Now()
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errOut.String(), took: time.Since(began), ended: time.Now()}
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr):
		r.code = exitErr.ExitCode()
	default:
		t.Fatalf("run kubectl: %v", err)
	}
	return r
}

func expect(t *testing.T, r result, code int, stdout string) {
	t.Helper()
	if r.code != code || r.stdout != stdout {
		t.Fatalf("got %s\nwant exit %d and stdout %q", r, code, stdout)
	}
}

func expectStderr(t *testing.T, r result, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(r.stderr, p) {
			t.Fatalf("stderr lacks %q; got %s", p, r)
		}
	}
}

// stillRunning fails the test when any of the waits returns within d.
func stillRunning(t *testing.T, d time.Duration, chs ...<-chan result) {
	t.Helper()
	vigiltest.Consistently(t, d, func() error {
		for _, ch := range chs {
			select {
			case r := <-ch:
				return fmt.Errorf("the wait returned before the change it waits for: %s", r)
			default:
			}
		}
		return nil
	})
}

func receive(t *testing.T, ch <-chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(60 * time.Second):
		t.Fatal("the wait did not return within 60s")
		return result{}
	}
}

// waitForText waits until b contains s.
func waitForText(t *testing.T, b *vigiltest.Buffer, s string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(b.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("stderr never said %q within 30s; got:\n%s", s, b.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func createConfigMap(t *testing.T, ns, name string, labels, data map[string]string) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, Data: data}
	if err := env.Client.Create(t.Context(), cm); err != nil {
		t.Fatalf("create ConfigMap %s: %v", name, err)
	}
	return cm
}

func patchConfigMapData(t *testing.T, ns, name, key, value string) {
	t.Helper()
	patch := fmt.Appendf(nil, `{"data":{%q:%q}}`, key, value)
	if _, err := env.Clientset.CoreV1().ConfigMaps(ns).Patch(t.Context(), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func newGizmo(ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("wait.vigil.dev/v1")
	u.SetKind("Gizmo")
	u.SetNamespace(ns)
	u.SetName(name)
	u.Object["spec"] = map[string]any{"size": int64(1)}
	return u
}

func createGizmo(t *testing.T, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u := newGizmo(ns, name)
	if err := env.Client.Create(t.Context(), u); err != nil {
		t.Fatalf("create Gizmo %s: %v", name, err)
	}
	return u
}

// setGizmoStatus writes status through the status subresource: a Ready
// condition with the given status and observedGeneration, and a phase.
func setGizmoStatus(t *testing.T, u *unstructured.Unstructured, ready string, observed int64, phase string) {
	t.Helper()
	u.Object["status"] = map[string]any{
		"phase":              phase,
		"observedGeneration": observed,
		"conditions": []any{map[string]any{
			"type": "Ready", "status": ready, "reason": "Tested", "message": "set by the test",
			"observedGeneration": observed, "lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
		}},
	}
	if err := env.Client.Status().Update(t.Context(), u); err != nil {
		t.Fatalf("update Gizmo status: %v", err)
	}
}

// A wait that starts before the object exists returns once it is created.
func TestWaitForCreateReturnsWhenCreated(t *testing.T) {
	t.Parallel()
	ns, kc := env.Namespace(t), kubeconfigFile(t)
	ch := goWait(t, kc, nil, "configmap/late", "--for=create", "-n", ns, "--timeout=40s")
	stillRunning(t, 200*time.Millisecond, ch)
	beforeCreate := time.Now()
	createConfigMap(t, ns, "late", nil, nil)
	r := receive(t, ch)
	expect(t, r, cmdutil.ExitOK, "configmap/late condition met\n")
	if r.ended.Before(beforeCreate) {
		t.Fatalf("the wait returned at %s, before the ConfigMap was created at %s", r.ended, beforeCreate)
	}
	// Already there: at once.
	expect(t, vigilWait(t, kc, "cm/late", "--for=create", "-n", ns), cmdutil.ExitOK, "configmap/late condition met\n")
}

func TestWaitForDelete(t *testing.T) {
	t.Parallel()
	ns, kc := env.Namespace(t), kubeconfigFile(t)
	createConfigMap(t, ns, "doomed", nil, nil)
	createConfigMap(t, ns, "set-1", map[string]string{"app": "doomed"}, nil)
	createConfigMap(t, ns, "set-2", map[string]string{"app": "doomed"}, nil)

	var oneProgress, setProgress vigiltest.Buffer
	one := goWait(t, kc, &oneProgress, "cm/doomed", "--for=delete", "-n", ns, "--timeout=40s", "--progress-interval=100ms")
	set := goWait(t, kc, &setProgress, "cm", "-l", "app=doomed", "--for=delete", "-n", ns, "--timeout=40s", "--progress-interval=100ms")
	stillRunning(t, 200*time.Millisecond, one, set)
	// The waiter has found the object (its progress says so) before it is
	// deleted: one deleted before it looked is not there, a wait that
	// ends at once and says nothing, as kubectl wait's does.
	waitForText(t, &oneProgress, "last seen: still exists")
	if err := env.Clientset.CoreV1().ConfigMaps(ns).Delete(t.Context(), "doomed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect(t, receive(t, one), cmdutil.ExitOK, "configmap/doomed condition met\n")
	// The set's waiter has listed its two objects (its progress says so): a
	// deletion before its list would leave set-1 out of what it waits for,
	// as kubectl does.
	waitForText(t, &setProgress, "0 of 2 match")
	if err := env.Clientset.CoreV1().ConfigMaps(ns).Delete(t.Context(), "set-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	stillRunning(t, 100*time.Millisecond, set) // set-2 is still there
	if err := env.Clientset.CoreV1().ConfigMaps(ns).Delete(t.Context(), "set-2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect(t, receive(t, set), cmdutil.ExitOK, "configmap/set-1 condition met\nconfigmap/set-2 condition met\n")

	// Already gone: done at once, and nothing to print, as kubectl does.
	expect(t, vigilWait(t, kc, "cm/doomed", "--for=delete", "-n", ns), cmdutil.ExitOK, "")
}

func TestWaitForEstablished(t *testing.T) {
	t.Parallel()
	ns, kc := env.Namespace(t), kubeconfigFile(t)
	if err := env.InstallCRDYAML(crdYAML("sprockets", "sprocket", "Sprocket", "established.wait.vigil.dev")); err != nil {
		t.Fatal(err)
	}
	const name = "sprockets.established.wait.vigil.dev"
	want := "customresourcedefinition.apiextensions.k8s.io/" + name + " condition met\n"
	expect(t, vigilWait(t, kc, "crd/"+name, "--for=established"), cmdutil.ExitOK, want)
	expect(t, vigilWait(t, kc, "customresourcedefinitions.apiextensions.k8s.io/"+name, "--for=established"), cmdutil.ExitOK, want)

	createConfigMap(t, ns, "not-a-crd", nil, nil)
	r := vigilWait(t, kc, "cm/not-a-crd", "--for=established", "-n", ns)
	expect(t, r, cmdutil.ExitFailed, "")
	expectStderr(t, r, "--for=established: expected a CustomResourceDefinition", "--for=ready")
}

func TestWaitForReady(t *testing.T) {
	t.Parallel()
	ns, kc := env.Namespace(t), kubeconfigFile(t)
	// kstatus: a ConfigMap is Current as soon as it exists.
	createConfigMap(t, ns, "plain", nil, nil)
	expect(t, vigilWait(t, kc, "cm/plain", "--for=ready", "-n", ns), cmdutil.ExitOK, "configmap/plain condition met\n")

	// No controller-manager runs, so a Deployment never rolls out.
	labels := map[string]string{"app": "web"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.invalid/web:1"}}},
			},
		},
	}
	if err := env.Client.Create(t.Context(), dep); err != nil {
		t.Fatal(err)
	}
	r := vigilWait(t, kc, "deploy/web", "--for=ready", "-n", ns, "--timeout=1s")
	expect(t, r, cmdutil.ExitTimedOut, "")
	expectStderr(t, r, "error: timed out waiting for the condition on deployments/web", "InProgress")
}

func TestWaitForCondition(t *testing.T) {
	t.Parallel()
	installGizmos(t)
	ns, kc := env.Namespace(t), kubeconfigFile(t)
	g := createGizmo(t, ns, "g1")

	ch := goWait(t, kc, nil, "gizmos.wait.vigil.dev/g1", "--for=condition=Ready", "-n", ns, "--timeout=40s")
	stillRunning(t, 200*time.Millisecond, ch)
	setGizmoStatus(t, g, "True", g.GetGeneration(), "Running")
	expect(t, receive(t, ch), cmdutil.ExitOK, "gizmo.wait.vigil.dev/g1 condition met\n")

	// The status is compared case-insensitively, as kubectl does.
	expect(t, vigilWait(t, kc, "gz/g1", "--for=condition=Ready=TRUE", "-n", ns, "--timeout=0"), cmdutil.ExitOK, "gizmo.wait.vigil.dev/g1 condition met\n")
	r := vigilWait(t, kc, "gizmo/g1", "--for=condition=Ready=False", "-n", ns, "--timeout=0")
	expect(t, r, cmdutil.ExitFailed, "")
	expectStderr(t, r, "error: condition not met for gizmos/g1", "condition Ready=True")

	// A spec change raises the generation: Ready=True is stale until the
	// status is written for it.
	if err := unstructured.SetNestedField(g.Object, int64(2), "spec", "size"); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Update(t.Context(), g); err != nil {
		t.Fatal(err)
	}
	if g.GetGeneration() != 2 {
		t.Fatalf("generation %d after a spec change, want 2", g.GetGeneration())
	}
	r = vigilWait(t, kc, "gizmo/g1", "--for=condition=Ready", "-n", ns, "--timeout=0")
	expect(t, r, cmdutil.ExitFailed, "")
	expectStderr(t, r, "stale status: observedGeneration 1 < generation 2")
	setGizmoStatus(t, g, "True", 2, "Running")
	expect(t, vigilWait(t, kc, "gizmo/g1", "--for=condition=Ready", "-n", ns, "--timeout=0"), cmdutil.ExitOK, "gizmo.wait.vigil.dev/g1 condition met\n")
}

func TestWaitForJSONPathAndCEL(t *testing.T) {
	t.Parallel()
	installGizmos(t)
	ns, kc := env.Namespace(t), kubeconfigFile(t)
	g := createGizmo(t, ns, "jp")

	ch := goWait(t, kc, nil, "gizmo/jp", "--for=jsonpath={.status.phase}=Running", "-n", ns, "--timeout=40s")
	cel := goWait(t, kc, nil, "gizmo/jp", `--for=cel=object.?status.?phase.orValue("") == "Running"`, "-n", ns, "--timeout=40s")
	stillRunning(t, 200*time.Millisecond, ch, cel)
	setGizmoStatus(t, g, "False", 1, "Running")
	expect(t, receive(t, ch), cmdutil.ExitOK, "gizmo.wait.vigil.dev/jp condition met\n")
	expect(t, receive(t, cel), cmdutil.ExitOK, "gizmo.wait.vigil.dev/jp condition met\n")

	const met = "gizmo.wait.vigil.dev/jp condition met\n"
	for _, forFlag := range []string{
		"--for=jsonpath={.status.phase}",           // any value
		"--for=jsonpath=.status.phase=Running",     // relaxed, as kubectl takes it
		"--for=jsonpath='{.status.phase}'=Running", // quotes a shell would remove, kept in container args
		`--for=jsonpath={.status.conditions[?(@.type=="Ready")].status}=False`,
		`--for=cel=object.status.phase == "Running" && object.spec.size == 1`,
	} {
		expect(t, vigilWait(t, kc, "gizmo/jp", forFlag, "-n", ns, "--timeout=0"), cmdutil.ExitOK, met)
	}
	r := vigilWait(t, kc, "gizmo/jp", "--for=jsonpath={.status.phase}=Stopped", "-n", ns, "--timeout=0")
	expect(t, r, cmdutil.ExitFailed, "")
	expectStderr(t, r, "{.status.phase}=Running, want Stopped")
	r = vigilWait(t, kc, "gizmo/jp", `--for=cel=object.status.phase == "Stopped"`, "-n", ns, "--timeout=0")
	expect(t, r, cmdutil.ExitFailed, "")
	expectStderr(t, r, "evaluated to false")
}

func TestWaitSelectorModes(t *testing.T) {
	t.Parallel()
	ns, kc := env.Namespace(t), kubeconfigFile(t)
	set := map[string]string{"app": "set"}
	createConfigMap(t, ns, "a", set, map[string]string{"ok": "yes"})
	createConfigMap(t, ns, "b", set, map[string]string{"ok": "no"})
	createConfigMap(t, ns, "c", set, map[string]string{"ok": "no"})
	createConfigMap(t, ns, "other", nil, map[string]string{"ok": "no"})
	yes := "--for=jsonpath={.data.ok}=yes"

	// Every selected object must hold by default, as with kubectl.
	r := vigilWait(t, kc, "cm", "-l", "app=set", yes, "-n", ns, "--timeout=0")
	expect(t, r, cmdutil.ExitFailed, "")
	expectStderr(t, r, "error: condition not met for configmaps/b")
	expect(t, vigilWait(t, kc, "cm", "-l", "app=set", "--for=create", "-n", ns),
		cmdutil.ExitOK, "configmap/a condition met\nconfigmap/b condition met\nconfigmap/c condition met\n")
	expect(t, vigilWait(t, kc, "cm", "--all", "--for=create", "-n", ns, "-o", "name"),
		cmdutil.ExitOK, "configmap/a\nconfigmap/b\nconfigmap/c\nconfigmap/other\n")
	expect(t, vigilWait(t, kc, "cm", "--field-selector", "metadata.name=other", "--for=create", "-n", ns),
		cmdutil.ExitOK, "configmap/other condition met\n")

	// --any: one is enough; the ones that hold are printed.
	expect(t, vigilWait(t, kc, "cm", "-l", "app=set", yes, "--any", "-n", ns), cmdutil.ExitOK, "configmap/a condition met\n")
	expect(t, vigilWait(t, kc, "cm", "--all", yes, "--any", "-n", ns), cmdutil.ExitOK, "configmap/a condition met\n")
	// ... and for names too.
	expect(t, vigilWait(t, kc, "cm", "b", "a", yes, "--any", "-n", ns), cmdutil.ExitOK, "configmap/a condition met\n")

	// --at-least=2 waits for a second one.
	r = vigilWait(t, kc, "cm", "-l", "app=set", yes, "--at-least=2", "-n", ns, "--timeout=0")
	expect(t, r, cmdutil.ExitFailed, "")
	ch := goWait(t, kc, nil, "cm", "-l", "app=set", yes, "--at-least=2", "-n", ns, "--timeout=40s")
	stillRunning(t, 200*time.Millisecond, ch)
	patchConfigMapData(t, ns, "c", "ok", "yes")
	expect(t, receive(t, ch), cmdutil.ExitOK, "configmap/a condition met\nconfigmap/c condition met\n")

	// --all with a condition: all must hold.
	ch = goWait(t, kc, nil, "cm", "-l", "app=set", `--for=cel=object.data.ok == "yes"`, "-n", ns, "--timeout=40s")
	stillRunning(t, 200*time.Millisecond, ch)
	patchConfigMapData(t, ns, "b", "ok", "yes")
	expect(t, receive(t, ch), cmdutil.ExitOK, "configmap/a condition met\nconfigmap/b condition met\nconfigmap/c condition met\n")
}

// A type given as plural.group (or singular.group) that no CRD serves yet is
// waited for until the test installs its CRD.
func TestWaitForTypeNotInstalledYet(t *testing.T) {
	t.Parallel()
	ns, kc := env.Namespace(t), kubeconfigFile(t)
	var errPlural, errSingular vigiltest.Buffer
	plural := goWait(t, kc, &errPlural, "whatsits.late.wait.vigil.dev/w1", "--for=create", "-n", ns, "--timeout=50s")
	singular := goWait(t, kc, &errSingular, "whatsit.late.wait.vigil.dev", "w1", "--for=create", "-n", ns, "--timeout=50s", "-o", "name")
	waitForText(t, &errPlural, "waiting for a CustomResourceDefinition in group late.wait.vigil.dev")
	waitForText(t, &errSingular, "waiting for a CustomResourceDefinition in group late.wait.vigil.dev")
	stillRunning(t, 200*time.Millisecond, plural, singular)

	if err := env.InstallCRDYAML(crdYAML("whatsits", "whatsit", "Whatsit", "late.wait.vigil.dev")); err != nil {
		t.Fatal(err)
	}
	w := &unstructured.Unstructured{}
	w.SetAPIVersion("late.wait.vigil.dev/v1")
	w.SetKind("Whatsit")
	w.SetNamespace(ns)
	w.SetName("w1")
	if err := env.Client.Create(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	r := receive(t, plural)
	expect(t, r, cmdutil.ExitOK, "whatsit.late.wait.vigil.dev/w1 condition met\n")
	expectStderr(t, r, "whatsits.late.wait.vigil.dev is served now as Whatsit.late.wait.vigil.dev")
	expect(t, receive(t, singular), cmdutil.ExitOK, "whatsit.late.wait.vigil.dev/w1\n")
}

// A type given as TYPE.VERSION.GROUP that no CRD serves yet is read as
// kubectl's ParseResourceArg reads it: resource, version, group. The wait is
// for a CRD in that group serving that version, and it finishes once the
// test installs one.
func TestWaitForTypeVersionGroupNotInstalledYet(t *testing.T) {
	t.Parallel()
	ns, kc := env.Namespace(t), kubeconfigFile(t)
	var errOut vigiltest.Buffer
	ch := goWait(t, kc, &errOut, "sprockets.v1.versioned.wait.vigil.dev/s1", "--for=create", "-n", ns, "--timeout=50s", "--progress-interval=100ms")
	waitForText(t, &errOut, "waiting for a CustomResourceDefinition in group versioned.wait.vigil.dev that serves it in version v1")
	waitForText(t, &errOut, "last seen: no CustomResourceDefinition in group versioned.wait.vigil.dev names sprockets in version v1")
	stillRunning(t, 200*time.Millisecond, ch)
	if strings.Contains(errOut.String(), "group v1.versioned.wait.vigil.dev") {
		t.Fatalf("waits for group v1.versioned.wait.vigil.dev, want group versioned.wait.vigil.dev version v1:\n%s", errOut.String())
	}

	if err := env.InstallCRDYAML(crdYAML("sprockets", "sprocket", "Sprocket", "versioned.wait.vigil.dev")); err != nil {
		t.Fatal(err)
	}
	s := &unstructured.Unstructured{}
	s.SetAPIVersion("versioned.wait.vigil.dev/v1")
	s.SetKind("Sprocket")
	s.SetNamespace(ns)
	s.SetName("s1")
	if err := env.Client.Create(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	r := receive(t, ch)
	expect(t, r, cmdutil.ExitOK, "sprocket.versioned.wait.vigil.dev/s1 condition met\n")
	expectStderr(t, r, "sprockets.v1.versioned.wait.vigil.dev is served now as Sprocket.versioned.wait.vigil.dev")
}

func TestWaitForUnknownTypes(t *testing.T) {
	t.Parallel()
	ns, kc := env.Namespace(t), kubeconfigFile(t)
	// Without a group there is nothing to wait for.
	r := vigilWait(t, kc, "nosuchtype/x", "--for=create", "-n", ns)
	expect(t, r, cmdutil.ExitFailed, "")
	expectStderr(t, r, `the server doesn't have a resource type "nosuchtype"`, "qualify the type with its group")
	// A built-in group gets no CRDs.
	r = vigilWait(t, kc, "nosuchtypes.apps/x", "--for=create", "-n", ns)
	expect(t, r, cmdutil.ExitFailed, "")
	expectStderr(t, r, `group "apps"`)
	// --timeout=0 does not wait for the CRD.
	r = vigilWait(t, kc, "thingamajigs.never.wait.vigil.dev/x", "--for=create", "-n", ns, "--timeout=0")
	expect(t, r, cmdutil.ExitFailed, "")
	expectStderr(t, r, "error: condition not met for thingamajigs.never.wait.vigil.dev/x")
	// A timeout while waiting for the CRD is a timeout.
	r = vigilWait(t, kc, "thingamajigs.never.wait.vigil.dev/x", "--for=create", "-n", ns, "--timeout=1s")
	expect(t, r, cmdutil.ExitTimedOut, "")
	expectStderr(t, r, "error: timed out waiting for the condition on thingamajigs.never.wait.vigil.dev/x", "still not served")
}

// Through Execute, as the binary runs: not in parallel (see vigilWaitErr).
// The timeout is said once: kubectl's line, with what was last seen.
func TestWaitTimeoutExits124WithWhatWasSeen(t *testing.T) {
	ns, kc := env.Namespace(t), kubeconfigFile(t)
	r := vigilExecute(t, kc, "cm/missing", "--for=create", "-n", ns, "--timeout=1s", "--progress-interval=200ms")
	expect(t, r, cmdutil.ExitTimedOut, "")
	expectStderr(t, r,
		"vigil: waiting ", "for ConfigMap "+ns+"/missing: created; last seen: not found", // a progress line
		"error: timed out waiting for the condition on configmaps/missing (after 1s; last seen: not found)\n")
	if n := strings.Count(r.stderr, "timed out"); n != 1 {
		t.Errorf("the timeout said %d times, want once:\n%s", n, r.stderr)
	}
	if r.took < time.Second {
		t.Fatalf("timed out after %s, before the 1s timeout", r.took)
	}
}

func TestWaitTimeoutZeroChecksOnce(t *testing.T) {
	t.Parallel()
	ns, kc := env.Namespace(t), kubeconfigFile(t)
	createConfigMap(t, ns, "here", nil, map[string]string{"k": "v"})
	expect(t, vigilWait(t, kc, "cm/here", "--for=jsonpath={.data.k}=v", "-n", ns, "--timeout=0"), cmdutil.ExitOK, "configmap/here condition met\n")
	for _, args := range [][]string{
		{"cm/here", "--for=jsonpath={.data.k}=w"},
		{"cm/absent", "--for=create"},
		{"cm", "--all", "--for=delete"},
	} {
		r := vigilWait(t, kc, append(args, "-n", ns, "--timeout=0")...)
		expect(t, r, cmdutil.ExitFailed, "")
		expectStderr(t, r, "error: condition not met for configmaps/", "--timeout=0: checked once, not met")
		// Without check-once semantics it would wait for the check limit (30s).
		if r.took > 15*time.Second {
			t.Fatalf("--timeout=0 took %s: it waited", r.took)
		}
	}
}

func TestWaitOutputFormats(t *testing.T) {
	t.Parallel()
	ns, kc := env.Namespace(t), kubeconfigFile(t)
	createConfigMap(t, ns, "one", map[string]string{"app": "out"}, map[string]string{"k": "v"})
	createConfigMap(t, ns, "two", map[string]string{"app": "out"}, map[string]string{"k": "w"})

	expect(t, vigilWait(t, kc, "cm/one", "--for=create", "-n", ns, "-o", "name"), cmdutil.ExitOK, "configmap/one\n")

	r := vigilWait(t, kc, "cm/one", "--for=create", "-n", ns, "-o", "json")
	if r.code != cmdutil.ExitOK {
		t.Fatal(r)
	}
	var got corev1.ConfigMap
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("-o json: %v\n%s", err, r.stdout)
	}
	if got.Kind != "ConfigMap" || got.Name != "one" || got.Namespace != ns || got.Data["k"] != "v" {
		t.Fatalf("-o json printed %+v", got)
	}
	if len(got.ManagedFields) != 0 || !strings.HasPrefix(r.stdout, "{\n    \"apiVersion\"") {
		t.Fatalf("-o json should be indented by 4 and leave managedFields out, as kubectl's:\n%s", r.stdout)
	}

	r = vigilWait(t, kc, "cm", "-l", "app=out", "--for=create", "-n", ns, "-o", "yaml")
	if r.code != cmdutil.ExitOK {
		t.Fatal(r)
	}
	docs := strings.Split(r.stdout, "---\n")
	if len(docs) != 2 {
		t.Fatalf("-o yaml of two objects: want two documents separated by ---, got:\n%s", r.stdout)
	}
	for i, want := range []string{"one", "two"} {
		var cm corev1.ConfigMap
		if err := yaml.Unmarshal([]byte(docs[i]), &cm); err != nil {
			t.Fatal(err)
		}
		if cm.Name != want || cm.Kind != "ConfigMap" {
			t.Fatalf("-o yaml document %d is %s %s, want ConfigMap %s", i, cm.Kind, cm.Name, want)
		}
	}
}

// Types are resolved as kubectl resolves them.
func TestWaitResolvesTypeNames(t *testing.T) {
	t.Parallel()
	installGizmos(t)
	ns, kc := env.Namespace(t), kubeconfigFile(t)
	createConfigMap(t, ns, "x", nil, nil)
	createGizmo(t, ns, "g")
	for _, tc := range []struct{ arg, want string }{
		{"cm/x", "configmap/x"},
		{"configmap/x", "configmap/x"},
		{"configmaps/x", "configmap/x"},
		{"ConfigMap/x", "configmap/x"},
		{"crd/gizmos.wait.vigil.dev", "customresourcedefinition.apiextensions.k8s.io/gizmos.wait.vigil.dev"},
		{"customresourcedefinition.apiextensions.k8s.io/gizmos.wait.vigil.dev", "customresourcedefinition.apiextensions.k8s.io/gizmos.wait.vigil.dev"},
		{"gz/g", "gizmo.wait.vigil.dev/g"},
		{"gizmos/g", "gizmo.wait.vigil.dev/g"},
		{"Gizmo/g", "gizmo.wait.vigil.dev/g"},
		{"gizmos.wait.vigil.dev/g", "gizmo.wait.vigil.dev/g"},
		{"gizmos.v1.wait.vigil.dev/g", "gizmo.wait.vigil.dev/g"},
		{"Gizmo.wait.vigil.dev/g", "gizmo.wait.vigil.dev/g"},
		{"namespace/" + ns, "namespace/" + ns},
	} {
		expect(t, vigilWait(t, kc, tc.arg, "--for=create", "-n", ns, "-o", "name"), cmdutil.ExitOK, tc.want+"\n")
	}
	// Several types at once, separated by commas.
	expect(t, vigilWait(t, kc, "cm,gz", "--all", "--for=create", "-n", ns, "-o", "name"), cmdutil.ExitOK, "configmap/x\ngizmo.wait.vigil.dev/g\n")
}

// Flag mistakes fail at once with exit 1 and say what was expected.
func TestWaitFlagErrors(t *testing.T) {
	t.Parallel()
	kc := kubeconfigFile(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"cm/x"}, "--for: expected a condition to wait for: create, delete, established, ready, condition=TYPE[=STATUS], jsonpath='{.path}'[=VALUE] or cel='EXPR'"},
		{[]string{"cm/x", "--for=exists"}, "--for=exists: unrecognized condition: expected one of create, delete, established, ready, condition="},
		{[]string{"cm/x", "--for=condition="}, "expected a condition type"},
		{[]string{"cm/x", "--for=condition=Ready=Maybe"}, `expected the status True, False or Unknown after Ready=, got "Maybe"`},
		{[]string{"cm/x", "--for=jsonpath="}, "expected a JSONPath expression"},
		{[]string{"cm/x", "--for=jsonpath={.a}="}, "expected a value after the equal sign"},
		{[]string{"cm/x", "--for=jsonpath={.a}=b=c"}, "a single = separates the value"},
		{[]string{"cm/x", "--for=jsonpath={.a[}"}, "gate.JSONPath"},
		{[]string{"cm/x", "--for=cel=object.data"}, "expected a CEL expression of type bool"},
		{[]string{"cm/x", "--for=cel="}, "expected a CEL expression"},
		{[]string{"--for=create"}, "expected what to wait for"},
		{[]string{"cm", "--for=create"}, "resource(s) were provided, but no name was specified"},
		{[]string{"cm/x", "-l", "a=b", "--for=create"}, "a name cannot be given with -l"},
		{[]string{"cm/x", "--all", "--for=create"}, "names and --all"},
		{[]string{"cm/x", "-A", "--for=create"}, "a resource cannot be retrieved by name across all namespaces"},
		{[]string{"cm/x", "cm", "--for=create"}, `argument "cm": expected TYPE/NAME`},
		{[]string{"cm", "--all", "--any", "--at-least=2", "--for=create"}, "--any and --at-least"},
		{[]string{"cm", "--all", "--at-least=0", "--for=create"}, "--at-least: expected 1 or more, got 0"},
		{[]string{"cm", "a", "--at-least=2", "--for=create"}, "expected at most the 1 named objects"},
		{[]string{"cm", "-l", "a in (", "--for=create"}, "--selector"},
		{[]string{"cm/x", "--for=create", "-o", "wide"}, `--output: expected name, json or yaml, got "wide"`},
	} {
		r := vigilWait(t, kc, tc.args...)
		if r.code != cmdutil.ExitFailed || r.stdout != "" || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("vigil wait %s: %s\nwant exit 1 and stderr containing %q", strings.Join(tc.args, " "), r, tc.want)
		}
	}
}

// vigil wait and kubectl wait agree on exit status and stdout where both
// support the form; on timeout kubectl exits 1 and vigil 124, as documented.
//
// vigil runs through Execute, as the binary runs, so the test and its cases do
// not run in parallel (see vigilWaitErr).
func TestWaitMatchesKubectl(t *testing.T) {
	installGizmos(t)
	ns, kc := env.Namespace(t), kubeconfigFile(t)
	createConfigMap(t, ns, "a", map[string]string{"app": "diff"}, map[string]string{"k": "v"})
	createConfigMap(t, ns, "b", map[string]string{"app": "diff"}, map[string]string{"k": "v"})
	g := createGizmo(t, ns, "g1")
	setGizmoStatus(t, g, "True", g.GetGeneration(), "Running")

	// Every case but the last two holds already; those are checked once and
	// not met. The expected exit codes keep the comparison honest: two
	// commands failing alike for the same wrong reason would agree too.
	cases := [][]string{
		{"cm/a", "--for=create"},
		{"cm/a", "cm/b", "--for=create"},
		{"cm", "a", "b", "--for=create"},
		{"configmap/a", "--for=create", "-o", "name"},
		{"cm/a", "--for=create", "-o", "json"},
		{"cm/a", "--for=create", "-o", "yaml"},
		{"cm/gone", "--for=delete"},
		{"cm", "-l", "app=diff", "--for=create"},
		{"cm", "-l", "app=diff", "--all", "--for=create"},
		{"cm", "-l", "app=diff", "-A", "--for=create"},
		{"cm", "--all", "--for=jsonpath={.data.k}=v"},
		{"cm", "-l", "app=diff", "--for=jsonpath={.data.k}=v", "-o", "name"},
		{"cm/a", "--for=jsonpath={.data.k}=v"},
		{"cm/a", "--for=jsonpath={.data.k}"},
		{"cm/a", "--for=jsonpath=.data.k=v"},
		{"gizmos.wait.vigil.dev/g1", "--for=condition=Ready"},
		{"gizmo/g1", "--for=condition=Ready=true"},
		{"gz/g1", "--for=jsonpath={.status.phase}=Running"},
		{"gz/g1", `--for=jsonpath={.status.conditions[?(@.type=="Ready")].status}=True`},
		{"gz/g1", "--for=condition=Ready", "-o", "json"},
		{"crd/gizmos.wait.vigil.dev", "--for=condition=Established"},
		{"crd/gizmos.wait.vigil.dev", "--for=condition=NamesAccepted", "-o", "name"},
		{"namespace/" + ns, "--for=jsonpath={.status.phase}=Active"},
		// Checked once and not met: both exit 1.
		{"cm/a", "--for=jsonpath={.data.k}=other", "--timeout=0"},
		{"gz/g1", "--for=condition=Ready=False", "--timeout=0"},
	}
	for _, args := range cases {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			if !slices.Contains(args, "-A") { // kubectl fails on -A with -n
				args = append(args, "-n", ns)
			}
			k := kubectlWait(t, kc, args...)
			v := vigilExecute(t, kc, args...)
			if k.code != v.code || k.stdout != v.stdout {
				t.Fatalf("kubectl and vigil differ\nkubectl: %s\nvigil: %s", k, v)
			}
			want := cmdutil.ExitOK
			if slices.Contains(args, "--timeout=0") {
				want = cmdutil.ExitFailed
			}
			if k.code != want || (want == cmdutil.ExitOK && k.stdout == "" && !slices.Contains(args, "--for=delete")) {
				t.Fatalf("kubectl: %s\nwant exit %d and output", k, want)
			}
			if k.code != 0 {
				// Both explain it with kubectl's line (vigil's adds what it
				// last saw).
				line := strings.SplitN(k.stderr, "\n", 2)[0]
				expectStderr(t, v, line)
			}
		})
	}

	t.Run("timeout", func(t *testing.T) {
		args := []string{"cm/a", "--for=jsonpath={.data.k}=other", "--timeout=1s", "-n", ns}
		k := kubectlWait(t, kc, args...)
		v := vigilExecute(t, kc, args...)
		if k.code != cmdutil.ExitFailed || v.code != cmdutil.ExitTimedOut {
			t.Fatalf("want kubectl to exit 1 and vigil 124 on timeout\nkubectl: %s\nvigil: %s", k, v)
		}
		const line = "error: timed out waiting for the condition on configmaps/a"
		if k.stderr != line+"\n" || k.stdout != "" || v.stdout != "" {
			t.Fatalf("kubectl printed something else than %q\nkubectl: %s", line, k)
		}
		expectStderr(t, v, line+" (after 1s; last seen: {.data.k}=v, want other)\n")
	})
}

// The namespace defaults to the kubeconfig context's, as with kubectl; -A
// selects in every namespace.
func TestWaitNamespaces(t *testing.T) {
	t.Parallel()
	ns, other := env.Namespace(t), env.Namespace(t)
	createConfigMap(t, ns, "here", map[string]string{"app": "spread"}, nil)
	createConfigMap(t, other, "there", map[string]string{"app": "spread"}, nil)

	// A kubeconfig whose current context names ns, and a second context
	// naming other.
	cfg, err := clientcmd.LoadFromFile(kubeconfigFile(t))
	if err != nil {
		t.Fatal(err)
	}
	current := cfg.Contexts[cfg.CurrentContext].DeepCopy()
	cfg.Contexts[cfg.CurrentContext].Namespace = ns
	current.Namespace = other
	cfg.Contexts["other"] = current
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, kc); err != nil {
		t.Fatal(err)
	}

	expect(t, vigilWait(t, kc, "cm/here", "--for=create", "--timeout=0"), cmdutil.ExitOK, "configmap/here condition met\n")
	expect(t, vigilWait(t, kc, "cm/there", "--for=create", "--timeout=0", "--context", "other"), cmdutil.ExitOK, "configmap/there condition met\n")
	expect(t, vigilWait(t, kc, "cm/there", "--for=create", "--timeout=0", "-n", other), cmdutil.ExitOK, "configmap/there condition met\n")
	r := vigilWait(t, kc, "cm/there", "--for=create", "--timeout=0")
	expect(t, r, cmdutil.ExitFailed, "")
	expectStderr(t, r, "ConfigMap "+ns+"/there: created; last seen: not found")

	// Ordered by namespace, then name, as the API server lists them.
	want := "configmap/here\nconfigmap/there\n"
	if other < ns {
		want = "configmap/there\nconfigmap/here\n"
	}
	expect(t, vigilWait(t, kc, "cm", "-l", "app=spread", "-A", "--for=create", "-o", "name"), cmdutil.ExitOK, want)
	expect(t, vigilWait(t, kc, "cm", "-l", "app=spread", "--for=create", "-o", "name"), cmdutil.ExitOK, "configmap/here\n")
}

// WaitFlags runs without cobra, on a given rest.Config.
func TestWaitOptionsRun(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	createConfigMap(t, ns, "direct", nil, map[string]string{"k": "v"})
	var out, errOut vigiltest.Buffer
	o := &cli.WaitFlags{
		Args: []string{"configmap", "direct"}, For: []string{"jsonpath={.data.k}=v"},
		Namespace: ns, Timeout: 10 * time.Second, Output: "name", Config: env.Config, ErrOut: &errOut,
	}
	if err := o.Run(t.Context(), &out); err != nil || out.String() != "configmap/direct\n" {
		t.Fatalf("Run = %v, stdout %q, stderr %q; want configmap/direct", err, out.String(), errOut.String())
	}
	o.For = []string{"jsonpath={.data.k}=w"}
	o.Timeout = 300 * time.Millisecond
	err := o.Run(t.Context(), &out)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run = %v, want an error wrapping context.DeadlineExceeded (exit 124)", err)
	}
}
