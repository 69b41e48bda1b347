package shipping

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/internal/testsupport/testkit"
)

// `plan --cluster` sizes each role's informers at the cluster's size: it
// counts what each selects there, measures the heap one object takes as
// the informer holds it (whole, or metadata alone), and exits 1 with the
// limit to set when the watcher would not fit its memory limit's
// GOMEMLIMIT during a relist.
func TestPlanClusterSizesTheInformers(t *testing.T) {
	ctx := t.Context()
	home, apps := env.Namespace(t), env.Namespace(t)
	blob := strings.Repeat("x", 256<<10)
	for i := range 40 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: fmt.Sprintf("big-%02d", i)}, Data: map[string]string{"blob": blob}}
		if err := env.Client.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	module := func(metadataOnly bool) *vigil.Module {
		m := vigil.NewModule("sized", vigil.Options{Namespace: home})
		work := m.Capability("work")
		if metadataOnly {
			vigil.Watch(work, vigil.Metadata("", "v1", "ConfigMap")).InNamespace(apps).
				Reconcile(func(context.Context, *metav1.PartialObjectMetadata) error { return nil })
		} else {
			vigil.Watch(work, &corev1.ConfigMap{}).InNamespace(apps).
				Reconcile(func(context.Context, *corev1.ConfigMap) error { return nil })
		}
		return m
	}
	perObject := regexp.MustCompile(`watcher: ConfigMap \((whole objects|metadata only), namespaces ` + apps + `\): 40 objects × ([0-9.]+) (B|KiB|MiB) = `)
	bytes := func(plan string) float64 {
		t.Helper()
		m := perObject.FindStringSubmatch(plan)
		if m == nil {
			t.Fatalf("plan --cluster has no line sizing the watcher's informer of 40 ConfigMaps in %s:\n%s", apps, plan)
		}
		v, _ := strconv.ParseFloat(m[2], 64)
		return v * map[string]float64{"B": 1, "KiB": 1 << 10, "MiB": 1 << 20}[m[3]]
	}

	code, plan := testkit.RunCapture(t, module(false), "plan", "--cluster", "--kubeconfig", kubeconfig(t), "--watcher-memory-limit", "64Mi")
	if b := bytes(plan); b < 200<<10 || b > 1<<20 {
		t.Errorf("a whole ConfigMap of 256 KiB measured at %.0f bytes, want about 256 KiB (200 KiB to 1 MiB)", b)
	}
	if code != 1 || !strings.Contains(plan, "DOES NOT FIT") || !strings.Contains(plan, "--watcher-memory-limit (the chart's watcher.resources.limits.memory) to at least 128Mi") {
		t.Errorf("plan --cluster with a 64Mi watcher limit (exit %d): want exit 1, the watcher not fitting and 128Mi to set:\n%s", code, plan)
	}
	t.Logf("plan --cluster:\n%s", plan[strings.Index(plan, "memory at this cluster's size"):])

	code, plan = testkit.RunCapture(t, module(true), "plan", "--cluster", "--kubeconfig", kubeconfig(t), "--watcher-memory-limit", "64Mi")
	if b := bytes(plan); b < 100 || b > 4<<10 {
		t.Errorf("a ConfigMap's metadata measured at %.0f bytes, want some hundreds, under 4 KiB", b)
	}
	if code != 0 || !strings.Contains(plan, "watcher: about") || !strings.Contains(plan, ": fits") {
		t.Errorf("plan --cluster reading metadata alone with a 64Mi watcher limit (exit %d): want it to fit:\n%s", code, plan)
	}

	code, plan = testkit.RunCapture(t, module(false), "plan", "--cluster", "--kubeconfig", kubeconfig(t))
	if code != 0 || !strings.Contains(plan, "of its 512Mi limit: fits") {
		t.Errorf("plan --cluster with the default 512Mi watcher limit (exit %d): want it to fit:\n%s", code, plan)
	}
	if code, out := testkit.RunCapture(t, module(false), "plan", "--watcher-memory-limit", "lots"); code == 0 || strings.Contains(out, "memory at this cluster's size") {
		t.Errorf("--watcher-memory-limit lots: exit %d; want it refused", code)
	}
}

// `chart --cluster` writes the chart with each role's default memory limit
// raised to what its informers need on the cluster, measured as plan
// --cluster measures it, and never lowers one; `manifests` and `chart` take
// the limits as plan does (--watcher-memory-limit), GOMEMLIMIT following,
// and refuse one no container runs under.
func TestChartClusterSizesTheMemoryLimits(t *testing.T) {
	ctx := t.Context()
	home, apps := env.Namespace(t), env.Namespace(t)
	blob := strings.Repeat("x", 256<<10)
	for i := range 40 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: fmt.Sprintf("big-%02d", i)}, Data: map[string]string{"blob": blob}}
		if err := env.Client.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	m := vigil.NewModule("sized", vigil.Options{Namespace: home})
	vigil.Watch(m.Capability("work"), &corev1.ConfigMap{}).InNamespace(apps).
		Reconcile(func(context.Context, *corev1.ConfigMap) error { return nil })

	values := func(args ...string) (string, string) {
		t.Helper()
		dir := t.TempDir()
		code, out := testkit.RunCapture(t, m, append([]string{"chart", "-o", dir, "--image", "ghcr.io/acme/sized:1.0.0"}, args...)...)
		if code != 0 {
			t.Fatalf("chart %v: exit %d:\n%s", args, code, out)
		}
		data, err := os.ReadFile(filepath.Join(dir, "values.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		return string(data), out
	}
	limitOf := func(values, role string) string {
		t.Helper()
		var v map[string]any
		if err := yaml.Unmarshal([]byte(values), &v); err != nil {
			t.Fatal(err)
		}
		got, _, _ := unstructured.NestedString(v, role, "resources", "limits", "memory")
		return got
	}

	vals, out := values("--cluster", "--kubeconfig", kubeconfig(t), "--watcher-memory-limit", "64Mi")
	if got := limitOf(vals, "watcher"); got != "128Mi" || !strings.Contains(out, "watcher: memory limit 128Mi, sized for its informers' 40 objects on this cluster") {
		t.Errorf("chart --cluster --watcher-memory-limit 64Mi: the watcher's default limit %q, want 128Mi said as sized:\n%s", got, out)
	}
	vals, out = values("--cluster", "--kubeconfig", kubeconfig(t))
	if got := limitOf(vals, "watcher"); got != "512Mi" || !strings.Contains(out, "watcher: 512Mi holds its informers' 40 objects") {
		t.Errorf("chart --cluster with the default 512Mi: the watcher's limit %q, want 512Mi kept:\n%s", got, out)
	}
	if vals, _ = values("--watcher-memory-limit", "1Gi"); limitOf(vals, "watcher") != "1Gi" {
		t.Errorf("chart --watcher-memory-limit 1Gi: the watcher's default limit %q", limitOf(vals, "watcher"))
	}

	var watcher *unstructured.Unstructured
	for _, o := range testkit.RenderManifests(t, m, "--watcher-memory-limit", "192Mi") {
		if o.GetKind() == "Deployment" && strings.HasSuffix(o.GetName(), "-watcher") {
			watcher = o
		}
	}
	if watcher == nil {
		t.Fatal("manifests --watcher-memory-limit 192Mi: no watcher Deployment")
	}
	containers, _, _ := unstructured.NestedSlice(watcher.Object, "spec", "template", "spec", "containers")
	c := containers[0].(map[string]any)
	limit, _, _ := unstructured.NestedString(c, "resources", "limits", "memory")
	var gomemlimit string
	env, _, _ := unstructured.NestedSlice(c, "env")
	for _, e := range env {
		if e := e.(map[string]any); e["name"] == "GOMEMLIMIT" {
			gomemlimit, _ = e["value"].(string)
		}
	}
	if want := strconv.FormatInt(192<<20/10*9, 10); limit != "192Mi" || gomemlimit != want {
		t.Errorf("manifests --watcher-memory-limit 192Mi: limit %q, GOMEMLIMIT %q; want 192Mi and %s", limit, gomemlimit, want)
	}
	for _, args := range [][]string{{"manifests", "--image", "x", "--watcher-memory-limit", "10Mi"}, {"chart", "-o", t.TempDir(), "--image", "x", "--admission-memory-limit", "lots"}} {
		if code, _ := testkit.RunCapture(t, m, args...); code == 0 {
			t.Errorf("%v: exit 0; want it refused (manifests' TestMemoryLimits checks the words)", args)
		}
	}
}
