package shipping

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
