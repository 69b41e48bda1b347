package chart_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/kube"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/vigilkit/vigil/internal/serving/certs"
	"github.com/vigilkit/vigil/vigiltest"
)

var env *vigiltest.Env

func TestMain(m *testing.M) {
	code := vigiltest.Run(m, vigiltest.Options{}, &env)
	if builtDir != "" {
		_ = os.RemoveAll(builtDir)
	}
	os.Exit(code)
}

const (
	image      = "ghcr.io/acme/quota:1.0.0"
	module     = "quota"
	moduleNS   = "quota-system"
	exampleDir = "../../../examples/quota"
)

var (
	buildMu  sync.Mutex
	builtDir string
	built    = map[string]string{}
)

// example builds one of examples/ once, into a temporary folder.
func example(t testing.TB, name string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if bin, ok := built[name]; ok {
		return bin
	}
	if builtDir == "" {
		dir, err := os.MkdirTemp("", "vigil-chart-")
		if err != nil {
			t.Fatal(err)
		}
		builtDir = dir
	}
	bin := filepath.Join(builtDir, name)
	out, err := exec.Command("go", "build", "-o", bin, "../../../examples/"+name).CombinedOutput()
	if err != nil {
		t.Fatalf("go build examples/%s: %v\n%s", name, err, out)
	}
	built[name] = bin
	return bin
}

// quota builds examples/quota once.
func quota(t testing.TB) string { return example(t, module) }

// writeChart runs `quota chart` and loads what it wrote.
func writeChart(t testing.TB, env ...string) (string, *chartv2.Chart) {
	t.Helper()
	return writeChartOf(t, quota(t), env...)
}

func writeChartOf(t testing.TB, bin string, env ...string) (string, *chartv2.Chart) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "chart")
	cmd := exec.Command(bin, "chart", "-o", dir, "--image", image)
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("quota chart: %v\n%s", err, out)
	}
	ch, err := loader.Load(dir)
	if err != nil {
		t.Fatalf("load the chart: %v", err)
	}
	return dir, ch
}

// render renders the chart as `helm template` does.
func render(t *testing.T, ch *chartv2.Chart, vals map[string]any) (*releasev1.Release, error) {
	t.Helper()
	return renderWithAPIs(t, ch, vals)
}

// renderWithAPIs renders the chart as `helm template --api-versions` does
// with the API versions given.
func renderWithAPIs(t *testing.T, ch *chartv2.Chart, vals map[string]any, apis ...string) (*releasev1.Release, error) {
	t.Helper()
	i := action.NewInstall(action.NewConfiguration())
	i.DryRunStrategy = action.DryRunClient
	i.ReleaseName, i.Namespace = module, "default"
	i.IncludeCRDs = true
	kv, err := common.ParseKubeVersion("v1.34.0")
	if err != nil {
		t.Fatal(err)
	}
	i.KubeVersion = kv
	i.APIVersions = apis
	rel, err := i.RunWithContext(context.Background(), ch, vals)
	if err != nil {
		return nil, err
	}
	return rel.(*releasev1.Release), nil
}

// objects decodes a YAML stream into objects keyed by kind, namespace and
// name, normalized through JSON.
func objects(t *testing.T, stream string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, doc := range strings.Split(stream, "\n---") {
		var u map[string]any
		if err := yaml.Unmarshal([]byte(doc), &u); err != nil {
			t.Fatalf("decode %q: %v", doc, err)
		}
		if len(u) == 0 {
			continue
		}
		o := unstructured.Unstructured{Object: u}
		key := o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName()
		if _, dup := out[key]; dup {
			t.Fatalf("%s rendered twice", key)
		}
		out[key] = u
	}
	return out
}

func manifestObjects(t *testing.T, bin string, args ...string) map[string]map[string]any {
	t.Helper()
	out, err := exec.Command(bin, append([]string{"manifests", "--image", image}, args...)...).Output()
	if err != nil {
		t.Fatalf("quota manifests: %v", err)
	}
	return objects(t, string(out))
}

func TestChartWithDefaultValuesRendersTheManifests(t *testing.T) {
	// quota has a watcher; clusterconfig and phases have gates (init
	// containers); labeler mutates.
	for _, name := range []string{"quota", "clusterconfig", "phases", "labeler"} {
		t.Run(name, func(t *testing.T) { defaultsRenderTheManifests(t, name) })
	}
}

func defaultsRenderTheManifests(t *testing.T, name string) {
	bin := example(t, name)
	_, ch := writeChartOf(t, bin)
	if ch.Metadata.KubeVersion != ">=1.33.0-0 <1.38.0-0" {
		t.Errorf("kubeVersion %q: want the supported range, >=1.33.0-0 <1.38.0-0", ch.Metadata.KubeVersion)
	}
	rel, err := render(t, ch, nil)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	got := objects(t, rel.Manifest)
	// For the release render() tells Helm, whose versions the chart writes.
	want := manifestObjects(t, bin, "--kubernetes", "1.34")
	if len(want) < 10 {
		t.Fatalf("manifests printed %d objects: expected the module's whole set", len(want))
	}
	for key, w := range want {
		g, ok := got[key]
		if !ok {
			t.Errorf("%s: in manifests, not rendered by the chart", key)
			continue
		}
		if !reflect.DeepEqual(g, w) {
			gy, _ := yaml.Marshal(g)
			wy, _ := yaml.Marshal(w)
			t.Errorf("%s differs:\nchart:\n%s\nmanifests:\n%s", key, gy, wy)
		}
		if strings.HasSuffix(strings.SplitN(key, " ", 2)[0], "WebhookConfiguration") && strings.HasSuffix(key, "/"+name) {
			if _, has := g["webhooks"]; has {
				t.Errorf("%s carries webhooks: the module registers them, the chart must not own the field", key)
			}
		}
	}
	for key := range got {
		if _, ok := want[key]; !ok {
			t.Errorf("%s: rendered by the chart, not in manifests", key)
		}
	}
	if name != module {
		return
	}
	var events []string
	for _, h := range rel.Hooks {
		for _, e := range h.Events {
			events = append(events, h.Kind+"/"+h.Name+":"+string(e))
		}
	}
	sort.Strings(events)
	wantHooks := []string{
		"ClusterRole/vigil:quota-uninstall:pre-delete", "ClusterRoleBinding/vigil:quota-uninstall:pre-delete",
		"Job/quota-uninstall:pre-delete", "Role/vigil:quota-uninstall:pre-delete", "RoleBinding/vigil:quota-uninstall:pre-delete",
		"ServiceAccount/quota-uninstall:pre-delete",
	}
	if !reflect.DeepEqual(events, wantHooks) {
		t.Errorf("hooks %v, want %v", events, wantHooks)
	}
}

func TestChartLints(t *testing.T) {
	dir, _ := writeChart(t)
	l := action.NewLint()
	l.Strict = true
	res := l.Run([]string{dir}, nil)
	for _, m := range res.Messages {
		if m.Severity > support.InfoSev {
			t.Errorf("lint: %s", m.Error())
		}
	}
	for _, err := range res.Errors {
		t.Errorf("lint: %v", err)
	}
}

func TestChartSchemaRejectsWrongTypes(t *testing.T) {
	_, ch := writeChart(t)
	for _, c := range []struct {
		vals map[string]any
		want string
	}{
		{map[string]any{"admission": map[string]any{"replicas": "three"}}, "/admission/replicas"},
		{map[string]any{"image": map[string]any{"digest": "latest"}}, "/image/digest"},
		{map[string]any{"certificate": map[string]any{"mode": "self"}}, "/certificate/mode"},
		{map[string]any{"watcher": map[string]any{"resources": map[string]any{"limits": map[string]any{"memory": 512}}}}, "/watcher/resources/limits/memory"},
		{map[string]any{"extraEnv": map[string]any{"A": "b"}}, "/extraEnv"},
		{map[string]any{"admission": map[string]any{"replica": 3}}, "replica"},
		{map[string]any{"failurePolicy": map[string]any{"replicas": "Maybe"}}, "/failurePolicy/replicas"},
		{map[string]any{"failurePolicy": map[string]any{"nosuch": "Ignore"}}, "nosuch"},
		// A declared setting is pinned to what the chart was rendered
		// with, and extraEnv cannot contradict it.
		{map[string]any{"settings": map[string]any{"QUOTA_MAX_REPLICAS": "9"}}, "/settings/QUOTA_MAX_REPLICAS"},
		{map[string]any{"extraEnv": []any{map[string]any{"name": "QUOTA_MAX_REPLICAS", "value": "9"}}}, "/extraEnv/0/name"},
		{map[string]any{"extraEnv": []any{map[string]any{"name": "VIGIL_NAMESPACE", "value": "x"}}}, "/extraEnv/0/name"},
	} {
		_, err := render(t, ch, c.vals)
		if err == nil {
			t.Errorf("values %v rendered: want the schema to refuse them", c.vals)
			continue
		}
		t.Logf("values %v: %v", c.vals, err)
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("values %v: error %q does not name %s", c.vals, err, c.want)
		}
	}
}

func podSpecOf(t *testing.T, objs map[string]map[string]any, key string) map[string]any {
	t.Helper()
	d, ok := objs[key]
	if !ok {
		t.Fatalf("%s not rendered", key)
	}
	spec, _, _ := unstructured.NestedMap(d, "spec", "template", "spec")
	return spec
}

func TestChartValuesReachTheContainers(t *testing.T) {
	_, ch := writeChart(t)
	digest := "sha256:" + strings.Repeat("ab", 32)
	rel, err := render(t, ch, map[string]any{
		"image":             map[string]any{"tag": "2.0.0", "digest": digest},
		"admission":         map[string]any{"replicas": 3, "resources": map[string]any{"limits": map[string]any{"memory": "1Gi"}}, "nodeSelector": map[string]any{"pool": "system"}, "priorityClassName": "system-cluster-critical"},
		"watcher":           map[string]any{"tolerations": []any{map[string]any{"key": "dedicated", "operator": "Exists"}}, "affinity": nil},
		"logLevel":          "debug",
		"extraEnv":          []any{map[string]any{"name": "HTTPS_PROXY", "value": "http://proxy:3128"}},
		"extraVolumes":      []any{map[string]any{"name": "ca", "configMap": map[string]any{"name": "corp-ca"}}},
		"extraVolumeMounts": []any{map[string]any{"name": "ca", "mountPath": "/etc/ssl/corp"}},
		"certificate":       map[string]any{"mode": "existingSecret", "existingSecret": "quota-serving"},
		"failurePolicy":     map[string]any{"replicas": "Ignore"},
	})
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	objs := objects(t, rel.Manifest)
	adm := podSpecOf(t, objs, "Deployment quota-system/quota")
	if r, _, _ := unstructured.NestedFieldNoCopy(objs["Deployment quota-system/quota"], "spec", "replicas"); fmt.Sprint(r) != "3" {
		t.Errorf("admission replicas %v, want 3", r)
	}
	c := adm["containers"].([]any)[0].(map[string]any)
	if c["image"] != "ghcr.io/acme/quota:2.0.0@"+digest {
		t.Errorf("image %v: want the tag and the digest, as manifests --image writes them", c["image"])
	}
	envs := map[string]string{}
	for _, e := range c["env"].([]any) {
		e := e.(map[string]any)
		envs[e["name"].(string)] = fmt.Sprint(e["value"])
	}
	if envs["GOMEMLIMIT"] != fmt.Sprint(int64(1<<30)/10*9) {
		t.Errorf("GOMEMLIMIT %s: want 90%% of 1Gi", envs["GOMEMLIMIT"])
	}
	if envs["VIGIL_LOG_LEVEL"] != "debug" || envs["HTTPS_PROXY"] != "http://proxy:3128" {
		t.Errorf("env %v: want VIGIL_LOG_LEVEL=debug and HTTPS_PROXY", envs)
	}
	args := fmt.Sprint(c["args"])
	if !strings.Contains(args, "--failure-policy replicas=Ignore") {
		t.Errorf("args %s: want --failure-policy replicas=Ignore", args)
	}
	if !strings.Contains(args, "--cert-dir /etc/vigil/tls") || strings.Contains(args, "--cert-secret") {
		t.Errorf("args %s: want --cert-dir /etc/vigil/tls instead of --cert-secret", args)
	}
	mounts := fmt.Sprint(c["volumeMounts"])
	if !strings.Contains(mounts, "/etc/vigil/tls") || !strings.Contains(mounts, "/etc/ssl/corp") {
		t.Errorf("volumeMounts %s: want the certificate and the extra mount", mounts)
	}
	vols, _ := json.Marshal(adm["volumes"])
	if !strings.Contains(string(vols), `"secretName":"quota-serving"`) || !strings.Contains(string(vols), "corp-ca") {
		t.Errorf("volumes %s: want the existing Secret and the extra volume", vols)
	}
	if fmt.Sprint(adm["nodeSelector"]) != "map[pool:system]" || adm["priorityClassName"] != "system-cluster-critical" {
		t.Errorf("nodeSelector %v priorityClassName %v", adm["nodeSelector"], adm["priorityClassName"])
	}
	w := podSpecOf(t, objs, "Deployment quota-system/quota-watcher")
	if _, has := w["affinity"]; has {
		t.Errorf("watcher affinity %v: want none once the value is null", w["affinity"])
	}
	if len(w["tolerations"].([]any)) != 1 {
		t.Errorf("watcher tolerations %v", w["tolerations"])
	}
	wc := w["containers"].([]any)[0].(map[string]any)
	if !strings.Contains(fmt.Sprint(wc["volumeMounts"]), "/etc/ssl/corp") || strings.Contains(fmt.Sprint(wc["volumeMounts"]), "/etc/vigil/tls") {
		t.Errorf("watcher volumeMounts %v: want the extra mount, not the certificate", wc["volumeMounts"])
	}
	for key := range objs {
		if strings.HasPrefix(key, "Certificate ") {
			t.Errorf("%s rendered in existingSecret mode", key)
		}
	}
}

func TestChartCertManagerMode(t *testing.T) {
	_, ch := writeChart(t)
	if _, err := render(t, ch, map[string]any{"certificate": map[string]any{"mode": "certManager"}}); err == nil || !strings.Contains(err.Error(), "issuerRef.name") {
		t.Errorf("certManager without an issuer: error %v, want one naming certificate.certManager.issuerRef.name", err)
	}
	rel, err := render(t, ch, map[string]any{"certificate": map[string]any{"mode": "certManager", "certManager": map[string]any{"issuerRef": map[string]any{"name": "webhooks", "kind": "ClusterIssuer"}}}})
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	objs := objects(t, rel.Manifest)
	cert, ok := objs["Certificate quota-system/quota-serving"]
	if !ok {
		t.Fatalf("no Certificate rendered")
	}
	if s, _, _ := unstructured.NestedString(cert, "spec", "secretName"); s != "quota-serving-cert" {
		t.Errorf("Certificate secretName %q", s)
	}
	if names, _, _ := unstructured.NestedStringSlice(cert, "spec", "dnsNames"); !reflect.DeepEqual(names, []string{"quota.quota-system.svc", "quota.quota-system.svc.cluster.local"}) {
		t.Errorf("Certificate dnsNames %v", names)
	}
	if k, _, _ := unstructured.NestedString(cert, "spec", "issuerRef", "kind"); k != "ClusterIssuer" {
		t.Errorf("issuerRef kind %q", k)
	}
	vols, _ := json.Marshal(podSpecOf(t, objs, "Deployment quota-system/quota")["volumes"])
	if !strings.Contains(string(vols), `"secretName":"quota-serving-cert"`) {
		t.Errorf("volumes %s: want the Certificate's Secret mounted", vols)
	}
}

// helmConfig is an action configuration over the test API server, through a
// kubeconfig as the helm CLI reads one.
func helmConfig(t testing.TB, namespace string) *action.Configuration {
	t.Helper()
	kubeconfig := env.KubeConfigFile(t)
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = ptr.To(kubeconfig)
	flags.Namespace = ptr.To(namespace)
	cfg := action.NewConfiguration()
	if err := cfg.Init(flags, namespace, "secret"); err != nil {
		t.Fatalf("helm configuration: %v", err)
	}
	return cfg
}

// InstallChart installs the chart, timed, as `helm install` does without
// --wait (there is no kubelet to make the pods ready).
func installChart(t testing.TB, cfg *action.Configuration, ch *chartv2.Chart, vals map[string]any) (*releasev1.Release, time.Duration) {
	t.Helper()
	i := action.NewInstall(cfg)
	i.ReleaseName, i.Namespace = module, "default"
	i.WaitStrategy = kube.HookOnlyStrategy
	i.Timeout = time.Minute
	began := time.Now()
	rel, err := i.RunWithContext(context.Background(), ch, vals)
	took := time.Since(began)
	if err != nil {
		t.Fatalf("helm install: %v", err)
	}
	return rel.(*releasev1.Release), took
}

// tokenKubeconfig writes a kubeconfig holding a real token of the
// ServiceAccount, from the TokenRequest API.
func tokenKubeconfig(t *testing.T, namespace, name string) string {
	t.Helper()
	tr, err := env.Clientset.CoreV1().ServiceAccounts(namespace).CreateToken(context.Background(), name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token of %s/%s: %v", namespace, name, err)
	}
	cfg := rest.AnonymousClientConfig(env.Config)
	cfg.BearerToken = tr.Status.Token
	return vigiltest.WriteKubeConfig(t, cfg)
}

func deployment(replicas int32, ns string) *appsv1.Deployment {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{GenerateName: "app-", Namespace: ns}}
	d.Spec.Replicas = ptr.To(replicas)
	d.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}
	d.Spec.Template.Labels = map[string]string{"app": "x"}
	d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "c", Image: "busybox"}}
	return d
}

func TestChartInstallUpgradeRollbackUninstall(t *testing.T) {
	ctx := context.Background()
	_, ch := writeChart(t)
	cfg := helmConfig(t, "default")
	rel, took := installChart(t, cfg, ch, map[string]any{"failurePolicy": map[string]any{"replicas": "Ignore"}})
	t.Logf("installed revision %d in %s", rel.Version, took)

	c := env.Client
	get := func(obj client.Object, ns, name string) error {
		return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj)
	}
	var d appsv1.Deployment
	if err := get(&d, moduleNS, module); err != nil {
		t.Fatalf("admission Deployment after install: %v", err)
	}
	if *d.Spec.Replicas != 2 {
		t.Errorf("replicas %d after install, want 2", *d.Spec.Replicas)
	}

	// The module's admission role, run as the chart's ServiceAccount with a
	// real token: it registers its webhooks through the chart's RBAC.
	appNS := env.Namespace(t)
	addr := vigiltest.FreeAddr(t)
	// Its arguments are the Deployment's, with what only a pod has
	// (addresses, the handoff folder, the token) given here.
	args := append(append([]string(nil), d.Spec.Template.Spec.Containers[0].Args...), "--addr", addr, "--metrics-addr", "",
		"--webhook-url", "https://"+addr, "--handoff-dir", t.TempDir(),
		"--kubeconfig", tokenKubeconfig(t, moduleNS, module), "--shutdown-delay", "0s")
	adm := vigiltest.StartProcess(t, nil, quota(t), args...)
	denied := func() error {
		err := c.Create(ctx, deployment(10, appNS), client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), "the quota allows 3") {
			return fmt.Errorf("a Deployment of 10 replicas: %v, want denied by the quota", err)
		}
		return nil
	}
	vigiltest.Eventually(t, 60*time.Second, denied)
	// failurePolicy.replicas reached the registration through the flag.
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	if err := get(&vwc, "", module); err != nil {
		t.Fatal(err)
	}
	policies := map[string]string{}
	for _, w := range vwc.Webhooks {
		policies[w.Name] = string(ptr.Deref(w.FailurePolicy, ""))
	}
	var mwc admissionregistrationv1.MutatingWebhookConfiguration
	if err := get(&mwc, "", module); err != nil {
		t.Fatal(err)
	}
	for _, w := range mwc.Webhooks {
		policies[w.Name] = string(ptr.Deref(w.FailurePolicy, ""))
	}
	if len(policies) < 2 || policies["canary."+module+".vigil.dev"] != "Ignore" {
		t.Errorf("webhooks %v: want the capability's and the canary (mutating, Ignore)", policies)
	}
	found := false
	for name, p := range policies {
		if strings.Contains(name, "replicas") {
			found = true
			if p != "Ignore" {
				t.Errorf("webhook %s failurePolicy %s, want Ignore from failurePolicy.replicas", name, p)
			}
		}
	}
	if !found {
		t.Errorf("webhooks %v: none of the replicas capability", policies)
	}

	// Upgrade: new replicas and tag, applied server-side; what the module
	// registered stays.
	up := action.NewUpgrade(cfg)
	up.Namespace = "default"
	up.WaitStrategy = kube.HookOnlyStrategy
	up.Timeout = time.Minute
	if _, err := up.RunWithContext(ctx, module, ch, map[string]any{"admission": map[string]any{"replicas": 3}, "image": map[string]any{"tag": "1.0.1"}}); err != nil {
		t.Fatalf("helm upgrade: %v", err)
	}
	if err := get(&d, moduleNS, module); err != nil {
		t.Fatal(err)
	}
	if *d.Spec.Replicas != 3 || d.Spec.Template.Spec.Containers[0].Image != "ghcr.io/acme/quota:1.0.1" {
		t.Errorf("after upgrade: replicas %d image %s, want 3 and ghcr.io/acme/quota:1.0.1", *d.Spec.Replicas, d.Spec.Template.Spec.Containers[0].Image)
	}
	if err := denied(); err != nil {
		t.Errorf("after upgrade the webhooks no longer deny: %v", err)
	}

	rb := action.NewRollback(cfg)
	rb.Version = 1
	rb.WaitStrategy = kube.HookOnlyStrategy
	rb.Timeout = time.Minute
	if err := rb.Run(module); err != nil {
		t.Fatalf("helm rollback: %v", err)
	}
	if err := get(&d, moduleNS, module); err != nil {
		t.Fatal(err)
	}
	if *d.Spec.Replicas != 2 || d.Spec.Template.Spec.Containers[0].Image != image {
		t.Errorf("after rollback: replicas %d image %s, want 2 and %s", *d.Spec.Replicas, d.Spec.Template.Spec.Containers[0].Image, image)
	}
	if err := denied(); err != nil {
		t.Errorf("after rollback the webhooks no longer deny: %v", err)
	}

	// The pre-delete hook, as a kubelet would run it: its objects from the
	// release, its command as its own ServiceAccount.
	last, err := action.NewGet(cfg).Run(module)
	if err != nil {
		t.Fatal(err)
	}
	hooks := last.(*releasev1.Release).Hooks
	sort.SliceStable(hooks, func(i, j int) bool { return hooks[i].Weight < hooks[j].Weight })
	var hookObjs []*unstructured.Unstructured
	var job *unstructured.Unstructured
	for _, h := range hooks {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(h.Manifest), &u.Object); err != nil {
			t.Fatal(err)
		}
		if u.GetKind() == "Job" {
			job = u
		}
		if err := c.Create(ctx, u); err != nil {
			t.Fatalf("create hook %s %s: %v", u.GetKind(), u.GetName(), err)
		}
		hookObjs = append(hookObjs, u)
	}
	if job == nil {
		t.Fatal("no hook Job in the release")
	}
	podSpec, _, _ := unstructured.NestedMap(job.Object, "spec", "template", "spec")
	sa := podSpec["serviceAccountName"].(string)
	ctr := podSpec["containers"].([]any)[0].(map[string]any)
	args = nil
	for _, a := range ctr["args"].([]any) {
		args = append(args, a.(string))
	}
	hookKubeconfig := tokenKubeconfig(t, moduleNS, sa)
	if err := get(&corev1.Secret{}, moduleNS, module+"-tls"); err != nil {
		t.Fatalf("the managed certificate Secret before the hook: %v", err)
	}
	if code := adm.Stop(t, 30*time.Second); code != 0 {
		t.Errorf("admission exited %d on SIGTERM", code)
	}
	out, err := exec.Command(quota(t), append(args, "--kubeconfig", hookKubeconfig)...).CombinedOutput()
	if err != nil {
		t.Fatalf("hook command %v: %v\n%s", args, err, out)
	}
	if !strings.Contains(string(out), "watcher of module quota stopped") || !strings.Contains(string(out), "webhooks of module quota unregistered") {
		t.Errorf("hook command said %q", out)
	}
	// --delete-state: the managed certificate Secret and the Store, which
	// the admission role made, are gone too.
	for _, o := range []client.Object{&corev1.Secret{}, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "vigil.dev/v1alpha1", "kind": "Store"}}} {
		name := module
		if _, ok := o.(*corev1.Secret); ok {
			name = module + "-tls"
		}
		if err := get(o, moduleNS, name); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s after the hook: %v, want not found", o, name, err)
		}
	}
	var w appsv1.Deployment
	if err := get(&w, moduleNS, module+"-watcher"); err != nil || *w.Spec.Replicas != 0 {
		t.Errorf("watcher Deployment after the hook: %v, replicas %v: want scaled to 0", err, w.Spec.Replicas)
	}
	// The webhooks are empty now: nothing is sent to the module.
	if err := c.Create(ctx, deployment(10, appNS), client.DryRunAll); err != nil {
		t.Errorf("after the hook a Deployment of 10 replicas: %v, want admitted (no webhook)", err)
	}
	un := action.NewUninstall(cfg)
	un.DisableHooks = true
	un.WaitStrategy = kube.HookOnlyStrategy
	un.Timeout = time.Minute
	if _, err := un.Run(module); err != nil {
		t.Fatalf("helm uninstall: %v", err)
	}
	// hook-succeeded: Helm deletes the hook's objects once it passed.
	for _, u := range hookObjs {
		if err := c.Delete(ctx, u, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	assertNothingLeft(t)
}

// assertNothingLeft checks that nothing of the module is left but the Store
// CRD: no webhook configuration, no cluster-wide RBAC, no finalizer of the
// module, and its namespace going.
func assertNothingLeft(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	sel := client.MatchingLabels{"app.kubernetes.io/name": module}
	for _, gvk := range []schema.GroupVersionKind{
		{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "MutatingWebhookConfigurationList"},
		{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingWebhookConfigurationList"},
		{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingAdmissionPolicyList"},
		{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingAdmissionPolicyBindingList"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleList"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBindingList"},
		{Group: "apps", Version: "v1", Kind: "DeploymentList"},
		{Group: "", Version: "v1", Kind: "ServiceAccountList"},
		{Group: "", Version: "v1", Kind: "ServiceList"},
		{Group: "batch", Version: "v1", Kind: "JobList"},
		{Group: "networking.k8s.io", Version: "v1", Kind: "NetworkPolicyList"},
	} {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk)
		if err := env.Client.List(ctx, list, sel); err != nil {
			t.Fatalf("list %s: %v", gvk.Kind, err)
		}
		for _, o := range list.Items {
			t.Errorf("left after uninstall: %s %s/%s", gvk.Kind, o.GetNamespace(), o.GetName())
		}
		// Nothing of the module's, labelled or not, holds a finalizer of it.
		all := &unstructured.UnstructuredList{}
		all.SetGroupVersionKind(gvk)
		if err := env.Client.List(ctx, all); err != nil {
			t.Fatal(err)
		}
		for _, o := range all.Items {
			for _, f := range o.GetFinalizers() {
				if strings.HasPrefix(f, module+".vigil.dev/") {
					t.Errorf("%s %s/%s keeps the module's finalizer %s", gvk.Kind, o.GetNamespace(), o.GetName(), f)
				}
			}
		}
	}
	for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
		for _, name := range []string{module, module + "-fail-closed"} {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: kind})
			if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, u); !apierrors.IsNotFound(err) {
				t.Errorf("%s %s after uninstall: %v, want not found", kind, name, err)
			}
		}
	}
	// No namespace controller runs here: the namespace is deleting, and a
	// cluster's controller removes what the module made in it at run time
	// (its certificate Secret, its Store).
	ns := &unstructured.Unstructured{}
	ns.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "Namespace"})
	if err := env.Client.Get(ctx, client.ObjectKey{Name: moduleNS}, ns); err == nil && ns.GetDeletionTimestamp() == nil {
		t.Errorf("namespace %s not deleted by uninstall", moduleNS)
	}
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "stores.vigil.dev"}, crd); err != nil {
		t.Errorf("the Store CRD, shared by every module, after uninstall: %v", err)
	} else if crd.GetDeletionTimestamp() != nil {
		t.Errorf("the Store CRD is being deleted by uninstall")
	}
}

// BenchmarkChartInstall times `helm install` of the module's chart through
// the SDK against the test API server, without waiting for readiness (no
// kubelet runs the pods): chart_install_s, as make bench-ship prints it.
func BenchmarkChartInstall(b *testing.B) {
	cfg := helmConfig(b, "default")
	var total time.Duration
	for n := 0; n < b.N; n++ {
		b.StopTimer()
		// A fresh namespace each time: none is ever removed here.
		_, ch := writeChart(b, fmt.Sprintf("VIGIL_NAMESPACE=quota-bench-%d-%d", time.Now().UnixNano()%100000, n))
		b.StartTimer()
		_, took := installChart(b, cfg, ch, nil)
		b.StopTimer()
		total += took
		un := action.NewUninstall(cfg)
		un.DisableHooks = true
		un.WaitStrategy = kube.HookOnlyStrategy
		un.Timeout = time.Minute
		if _, err := un.Run(module); err != nil {
			b.Fatalf("helm uninstall: %v", err)
		}
	}
	b.ReportMetric(total.Seconds()/float64(b.N), "chart_install_s")
	fmt.Printf("ship-chart: chart_install_s=%.2f\n", total.Seconds()/float64(b.N))
}

// With certificate.mode existingSecret the admission container reads the
// mounted Secret, and the module writes the webhooks' caBundle from its
// ca.crt: nothing else writes the webhooks.
func TestChartExistingSecretCABundle(t *testing.T) {
	ctx := context.Background()
	const ns = "quota-certs"
	nsEnv := "VIGIL_NAMESPACE=" + ns
	_, ch := writeChart(t, nsEnv)
	cfg := helmConfig(t, "default")
	installChart(t, cfg, ch, map[string]any{"certificate": map[string]any{"mode": "existingSecret", "existingSecret": "quota-serving"}})
	t.Cleanup(func() {
		un := action.NewUninstall(cfg)
		un.DisableHooks, un.WaitStrategy, un.Timeout = true, kube.HookOnlyStrategy, time.Minute
		if _, err := un.Run(module); err != nil {
			t.Errorf("helm uninstall: %v", err)
		}
	})

	// The Secret, and its data where the kubelet would mount it.
	ca, err := certs.NewCA("quota-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	serving, err := ca.Issue([]string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	data := map[string][]byte{"tls.crt": serving.CertPEM, "tls.key": serving.KeyPEM, "ca.crt": ca.CertPEM}
	if err := env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "quota-serving"}, Data: data}); err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: module}, &d); err != nil {
		t.Fatal(err)
	}
	pod := d.Spec.Template.Spec
	mountDir := ""
	for _, m := range pod.Containers[0].VolumeMounts {
		if m.Name == "serving-cert" {
			mountDir = m.MountPath
		}
	}
	for _, v := range pod.Volumes {
		if v.Name == "serving-cert" && (v.Secret == nil || v.Secret.SecretName != "quota-serving") {
			t.Errorf("serving-cert volume %+v: want the Secret quota-serving", v)
		}
	}
	if mountDir == "" {
		t.Fatalf("no serving-cert mount in %+v", pod.Containers[0].VolumeMounts)
	}
	root := t.TempDir()
	certDir := filepath.Join(root, mountDir)
	if err := os.MkdirAll(certDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range data {
		if err := os.WriteFile(filepath.Join(certDir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// The Deployment's arguments, the mount path moved under the test's
	// folder as the pod's filesystem.
	var args []string
	for _, a := range pod.Containers[0].Args {
		if a == mountDir {
			a = certDir
		}
		args = append(args, a)
	}
	if !strings.Contains(strings.Join(args, " "), "--cert-dir "+certDir) {
		t.Fatalf("args %v: want --cert-dir %s", pod.Containers[0].Args, mountDir)
	}
	addr := vigiltest.FreeAddr(t)
	adm := vigiltest.StartProcess(t, []string{nsEnv}, quota(t), append(args, "--addr", addr, "--metrics-addr", "",
		"--webhook-url", "https://"+addr, "--handoff-dir", t.TempDir(),
		"--kubeconfig", tokenKubeconfig(t, ns, module), "--shutdown-delay", "0s")...)
	defer adm.Stop(t, 30*time.Second)
	appNS := env.Namespace(t)
	vigiltest.Eventually(t, 60*time.Second, func() error {
		err := env.Client.Create(ctx, deployment(10, appNS), client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), "the quota allows 3") {
			return fmt.Errorf("a Deployment of 10 replicas: %v, want denied by the quota", err)
		}
		return nil
	})
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	if err := env.Client.Get(ctx, client.ObjectKey{Name: module}, &vwc); err != nil {
		t.Fatal(err)
	}
	for _, w := range vwc.Webhooks {
		if string(w.ClientConfig.CABundle) != string(ca.CertPEM) {
			t.Errorf("webhook %s caBundle is not the mounted ca.crt", w.Name)
		}
	}
	var s corev1.Secret
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: module + "-tls"}, &s); !apierrors.IsNotFound(err) {
		t.Errorf("managed Secret %s-tls: %v, want none in existingSecret mode", module, err)
	}
}

// A declared setting reaches every container as the manifests and the chart
// were rendered with it, and the chart's values show it.
func TestSettingsReachEveryContainer(t *testing.T) {
	dir, _ := writeChart(t, "QUOTA_MAX_REPLICAS=5")
	values, err := os.ReadFile(filepath.Join(dir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(values), "settings:\n  QUOTA_MAX_REPLICAS: \"5\"") {
		t.Errorf("values.yaml lacks the setting as rendered:\n%s", values)
	}
	cmd := exec.Command(quota(t), "manifests", "--image", image)
	cmd.Env = append(os.Environ(), "QUOTA_MAX_REPLICAS=5")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	objs := objects(t, string(out))
	n := 0
	for key := range objs {
		if !strings.HasPrefix(key, "Deployment ") {
			continue
		}
		spec := podSpecOf(t, objs, key)
		for _, list := range []string{"initContainers", "containers"} {
			cs, _ := spec[list].([]any)
			for _, c := range cs {
				c := c.(map[string]any)
				n++
				found := false
				envs, _ := c["env"].([]any)
				for _, e := range envs {
					e := e.(map[string]any)
					found = found || (e["name"] == "QUOTA_MAX_REPLICAS" && e["value"] == "5")
				}
				if !found {
					t.Errorf("%s container %s: env %v lacks QUOTA_MAX_REPLICAS=5", key, c["name"], envs)
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no containers in the manifests")
	}
}
