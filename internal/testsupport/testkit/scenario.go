package testkit

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/loader"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/commands/modcli"
	"github.com/vigilkit/vigil/internal/definition/define"
	"github.com/vigilkit/vigil/internal/serving/admit"
	"github.com/vigilkit/vigil/internal/serving/certs"
	"github.com/vigilkit/vigil/vigiltest"
)

// The helpers below are those vigil's scenario tests (test/admission,
// test/watch, test/gates, test/shipping) share: each area's harness_test.go
// binds them to its control plane.

// NewClient is an admin's client of env's API server.
func NewClient(t testing.TB, env *vigiltest.Env) client.Client {
	t.Helper()
	c, err := client.New(env.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Eventually polls cond every 20 ms until it holds, or fails after d.
func Eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// CaptureStdout runs fn and returns what it printed on stdout.
func CaptureStdout(t testing.TB, fn func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stdout
	os.Stdout = w
	fn()
	os.Stdout = saved
	w.Close()
	data, _ := io.ReadAll(r)
	return string(data)
}

// RunCapture runs a module command in process and returns its exit code
// and what it printed on stdout.
func RunCapture(t testing.TB, m *vigil.Module, args ...string) (int, string) {
	t.Helper()
	var code int
	out := CaptureStdout(t, func() { code = vigil.Execute(t.Context(), m, args) })
	return code, out
}

// DecodeObjects decodes a stream of YAML or JSON objects.
func DecodeObjects(t testing.TB, data []byte) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("decode manifests: %v", err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
	return objs
}

// RenderManifests runs `<module> manifests` and decodes its objects.
func RenderManifests(t testing.TB, m *vigil.Module, flags ...string) []*unstructured.Unstructured {
	t.Helper()
	out := CaptureStdout(t, func() {
		if code := vigil.Execute(t.Context(), m, append([]string{"manifests", "--image", "example.com/least:1.0.0"}, flags...)); code != 0 {
			t.Errorf("manifests exited %d", code)
		}
	})
	return DecodeObjects(t, []byte(out))
}

// ApplyObjects applies objects with server-side apply as an admin, for
// real or as a dry run.
func ApplyObjects(t testing.TB, env *vigiltest.Env, objs []*unstructured.Unstructured, dryRun bool) {
	t.Helper()
	c := NewClient(t, env)
	for _, o := range objs {
		opts := []client.ApplyOption{client.FieldOwner("vigil-test"), client.ForceOwnership}
		if dryRun {
			opts = append(opts, client.DryRunAll)
		}
		if err := c.Apply(t.Context(), client.ApplyConfigurationFromUnstructured(o.DeepCopy()), opts...); err != nil {
			t.Fatalf("apply %s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
}

// RenderChart writes m's chart and renders it as `helm template
// --kube-version kube --api-versions apis` does, with vals.
func RenderChart(t testing.TB, m *vigil.Module, kube string, apis []string, vals map[string]any) (string, error) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "chart")
	if code := vigil.Execute(t.Context(), m, []string{"chart", "-o", dir, "--image", "example.com/module:1.0.0"}); code != 0 {
		t.Fatalf("chart exited %d", code)
	}
	ch, err := loader.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	i := action.NewInstall(action.NewConfiguration())
	i.DryRunStrategy = action.DryRunClient
	i.ReleaseName, i.Namespace = "module", "default"
	kv, err := common.ParseKubeVersion(kube)
	if err != nil {
		t.Fatal(err)
	}
	i.KubeVersion, i.APIVersions = kv, apis
	rel, err := i.RunWithContext(t.Context(), ch, vals)
	if err != nil {
		return "", err
	}
	return rel.(*releasev1.Release).Manifest, nil
}

// RunWatcher runs `<module> watcher` in the test process until the test
// ends (or stop is called) and waits until its /readyz passes.
func RunWatcher(t testing.TB, m *vigil.Module, kubeconfig string, flags ...string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	probe := vigiltest.FreeAddr(t)
	args := append([]string{"watcher", "--kubeconfig", kubeconfig, "--metrics-addr=", "--probe-addr", probe}, flags...)
	exited := make(chan struct{})
	var code int
	go func() { code = vigil.Execute(ctx, m, args); close(exited) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case <-exited:
				if code != 0 {
					t.Errorf("watcher exited %d", code)
				}
			case <-time.After(30 * time.Second):
				t.Errorf("watcher did not stop within 30s")
			}
		})
	}
	t.Cleanup(stop)
	WaitReady(t, "http://"+probe+"/readyz", exited)
	return stop
}

// Scrape reads a page, such as a /metrics page.
func Scrape(t testing.TB, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// GrepLines are the lines of s that contain substr.
func GrepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// HTTPGet reads url with c: the status and the body, or 0 and the error.
func HTTPGet(c *http.Client, url string) (int, string) {
	resp, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestPod is a Pod of one container, privileged or not.
func TestPod(ns, name string, labels map[string]string, privileged bool) *corev1.Pod {
	c := corev1.Container{Name: "app", Image: "nginx:1.27"}
	if privileged {
		c.SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{c}}}
}

// DenyPrivileged is a validation that denies a Pod with a privileged
// container.
func DenyPrivileged(_ context.Context, r *vigil.Request[*corev1.Pod]) vigil.Verdict {
	for _, c := range r.Object.Spec.Containers {
		if c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged {
			return admission.Deny("privileged pods are not allowed")
		}
	}
	return admission.Allow()
}

// Served is a module's admission role ServeAdmission runs.
type Served struct {
	Addr    string
	CA      *certs.CA
	CertDir string
	Stop    func()
}

// ServeAdmission runs `<module> admission` on a free loopback port with a
// certificate of a fresh CA, waits until /readyz passes, and registers the
// module's paths, each for the kinds and operations its bindings serve (as
// registration does), in namespaces.
func ServeAdmission(t *testing.T, env *vigiltest.Env, m *vigil.Module, module string, namespaces []string, flags ...string) *Served {
	t.Helper()
	ca, certDir := ServingDir(t)
	addr := vigiltest.FreeAddr(t)
	t.Setenv(modcli.EnvHandoffDir, t.TempDir())
	s := &Served{Addr: addr, CA: ca, CertDir: certDir}
	s.Stop = RunAdmission(t, m, addr, append([]string{"--cert-dir", certDir, "--kubeconfig", env.KubeConfigFile(t), "--shutdown-delay", "0s"}, flags...)...)
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}}}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := hc.Get("https://" + addr + "/readyz")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
			err = fmt.Errorf("%d %s", resp.StatusCode, body)
		}
		if time.Now().After(deadline) {
			t.Fatalf("admission not ready within 30s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	Register(t, env, module, "https://"+addr, ca.CertPEM, namespaces, BindingRules(t, m))
	return s
}

// BindingRules are the webhook rules of the module's mutations and
// validations, read from `<module> plan -o json`; the kinds' resources are
// the plurals the module declares (KindWithPlural), else their lowercase
// plurals (pods, configmaps, widgets).
func BindingRules(t testing.TB, m *vigil.Module) map[string][]admissionregistrationv1.RuleWithOperations {
	t.Helper()
	var plan struct {
		Bindings []struct {
			Action     string
			GVK        struct{ Group, Version, Kind string }
			Plural     string
			Operations []admissionregistrationv1.OperationType
		}
	}
	out := CaptureStdout(t, func() {
		if code := vigil.Execute(t.Context(), m, []string{"plan", "-o", "json"}); code != 0 {
			t.Errorf("plan exit %d", code)
		}
	})
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatalf("plan -o json: %v\n%s", err, out)
	}
	rules := map[string][]admissionregistrationv1.RuleWithOperations{}
	for _, b := range plan.Bindings {
		resource := b.Plural
		if resource == "" {
			resource = strings.ToLower(b.GVK.Kind) + "s"
		}
		rules[b.Action] = append(rules[b.Action], admissionregistrationv1.RuleWithOperations{
			Operations: b.Operations,
			Rule: admissionregistrationv1.Rule{APIGroups: []string{b.GVK.Group}, APIVersions: []string{b.GVK.Version},
				Resources: []string{resource}},
		})
	}
	return rules
}

// Register creates webhook configurations for the module's paths, with the
// rules of each action ("mutate", "validate"; "other" for a path the module
// does not serve), scoped to the namespaces, with failurePolicy Fail. An
// action without rules gets no webhook.
func Register(t testing.TB, env *vigiltest.Env, module, base string, caBundle []byte, namespaces []string, rules map[string][]admissionregistrationv1.RuleWithOperations) {
	t.Helper()
	selector := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpIn, Values: namespaces,
	}}}
	common := func(path string) admissionregistrationv1.WebhookClientConfig {
		return admissionregistrationv1.WebhookClientConfig{URL: ptr.To(base + path), CABundle: caBundle}
	}
	mutating := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: module + "-" + namespaces[0]}}
	if r := rules["mutate"]; len(r) > 0 {
		mutating.Webhooks = []admissionregistrationv1.MutatingWebhook{{
			Name: "mutate." + module + ".vigil.dev", ClientConfig: common(admit.MutatePath(module)),
			Rules: r, NamespaceSelector: selector, FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds: ptr.To[int32](5),
		}}
	}
	validating := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: module + "-" + namespaces[0]}}
	for _, path := range []string{"validate", "other"} {
		r := rules[path]
		if len(r) == 0 {
			continue
		}
		url := admit.ValidatePath(module)
		if path == "other" { // a path the module does not serve
			url = "/validate/other-than-" + module
		}
		validating.Webhooks = append(validating.Webhooks, admissionregistrationv1.ValidatingWebhook{
			Name: path + "." + module + ".vigil.dev", ClientConfig: common(url),
			Rules: r, NamespaceSelector: selector, FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds: ptr.To[int32](5),
		})
	}
	for _, o := range []client.Object{mutating, validating} {
		if err := env.Client.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
}

// FewRights makes users who may only create, get, update and patch
// Namespaces and Pods (a tenant's rights, cluster-wide), and returns a
// client of each, in order; what it creates is removed when the test ends.
func FewRights(t testing.TB, env *vigiltest.Env, name string, users ...string) []client.Client {
	t.Helper()
	cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name + "-few"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"namespaces", "pods"}, Verbs: []string{"create", "get", "update", "patch"},
	}}}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-few"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: cr.Name},
	}
	for _, u := range users {
		crb.Subjects = append(crb.Subjects, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: u})
	}
	for _, o := range []client.Object{cr, crb} {
		if err := env.Client.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
	var out []client.Client
	for _, u := range users {
		c, err := client.New(env.AsUserConfig(u), client.Options{Scheme: env.Scheme})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	return out
}

// AdmissionHandler serves the module's admission bindings in process, as
// its admission role does, with no API server: for tests of what a binding
// sees and answers. It serves them on admit.MutatePath and
// admit.ValidatePath.
func AdmissionHandler(t testing.TB, m *vigil.Module) *admit.Handler {
	t.Helper()
	s, _, ok := define.Resolved(m)
	if !ok {
		t.Fatalf("%T is not a module of package vigil", m)
	}
	return admit.NewHandler(s.Bindings, admit.Options{Module: s.Name, FailurePolicy: s.FailurePolicy, Log: logr.Discard()})
}

// ChildRoleEnv makes a test binary run as a module process (see RunChild):
// its value names the module, its arguments follow VIGIL_TEST_ARGS.
const ChildRoleEnv = "VIGIL_TEST_CHILD"

// StartChild re-runs the test binary as a process of one of the modules
// its TestMain's RunChild knows, with the role and flags of args.
func StartChild(t testing.TB, module string, env map[string]string, args ...string) *vigiltest.Process {
	t.Helper()
	e := []string{ChildRoleEnv + "=" + module, "VIGIL_TEST_ARGS=" + strings.Join(args, " ")}
	for k, v := range env {
		e = append(e, k+"="+v)
	}
	return vigiltest.StartProcess(t, e, os.Args[0])
}

// RunChild runs the test binary as the module process StartChild asked
// for: the module modules returns for role, with the config of
// VIGIL_TEST_KUBECONFIG; nil is an unknown role.
func RunChild(role string, modules func(role string, cfg *rest.Config) *vigil.Module) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("VIGIL_TEST_KUBECONFIG"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	cfg.QPS, cfg.Burst = 50, 100
	m := modules(role, cfg)
	if m == nil {
		fmt.Fprintf(os.Stderr, "unknown child role %q\n", role)
		return 2
	}
	return vigil.Execute(ctx, m, strings.Split(os.Getenv("VIGIL_TEST_ARGS"), " "))
}

// Main is the TestMain of a scenario package: the test binary re-run as a
// module process (StartChild) runs the module childModule returns for its
// role (childModule nil: the package starts none); re-run with
// VIGIL_HELPER=1, as a module binary that needs no cluster, it runs the
// tests without a control plane; else the package's tests run against a
// control plane of their own, reached through env.
func Main(m *testing.M, env **vigiltest.Env, childModule func(role string, cfg *rest.Config) *vigil.Module) int {
	if role := os.Getenv(ChildRoleEnv); role != "" && childModule != nil {
		return RunChild(role, childModule)
	}
	if os.Getenv("VIGIL_HELPER") == "1" {
		return m.Run()
	}
	return vigiltest.Run(m, vigiltest.Options{}, env)
}
