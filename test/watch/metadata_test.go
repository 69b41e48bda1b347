package watch

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/internal/testsupport/testkit"
	"github.com/vigilkit/vigil/vigiltest"
)

// A binding of vigil.Metadata reads objects by their metadata alone: its
// handlers get PartialObjectMetadata with the labels, annotations and
// finalizers the API server has, a Lister of it lists the same, and
// Finalize holds a deletion on it as on a typed object.
func TestMetadataOnlyBindingsSeeMetadata(t *testing.T) {
	ns := env.Namespace(t)
	c := newClient(t)
	m := vigil.NewModule("metadata", vigil.Options{Namespace: ns})
	cms := m.Capability("configmaps")
	configMaps := vigil.NewLister(m, vigil.Metadata("", "v1", "ConfigMap")).InNamespace(ns)
	var mu sync.Mutex
	seen := map[string]map[string]string{} // name → annotations, as the handler got them
	listed := -1
	vigil.Watch(cms, vigil.Metadata("", "v1", "ConfigMap")).InNamespace(ns).Named("annotated").
		Reconcile(func(ctx context.Context, cm *metav1.PartialObjectMetadata) error {
			if cm.Kind != "ConfigMap" || cm.APIVersion != "v1" {
				return vigil.Terminal(errors.New("the handler got " + cm.APIVersion + " " + cm.Kind + ", want v1 ConfigMap"))
			}
			all, err := configMaps.List(ctx, client.MatchingLabels{"team": "shop"})
			if err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			seen[cm.Name] = cm.Annotations
			listed = len(all)
			return nil
		})
	var finalized sync.Map
	vigil.Watch(cms, vigil.Metadata("", "v1", "ConfigMap")).InNamespace(ns).WithLabel("cleanup").Named("cleanup").
		Finalize(func(_ context.Context, cm *metav1.PartialObjectMetadata) error {
			finalized.Store(cm.Name, true)
			return nil
		})
	if err := m.Verify(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"team": "shop"},
			Annotations: map[string]string{"owner": "team-" + name}}, Data: map[string]string{"big": "value"}}
		if err := c.Create(t.Context(), cm); err != nil {
			t.Fatal(err)
		}
	}
	testkit.RunWatcher(t, m, kubeconfig(t), "--leader-elect=false")
	testkit.Eventually(t, 10*time.Second, "both ConfigMaps reconciled with their annotations, and the lister listing both", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return seen["a"]["owner"] == "team-a" && seen["b"]["owner"] == "team-b" && listed == 2
	})

	held := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "held", Labels: map[string]string{"cleanup": "yes"}}}
	if err := c.Create(t.Context(), held); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the finalizer on the object", func() bool {
		got := &corev1.ConfigMap{}
		return c.Get(context.Background(), client.ObjectKeyFromObject(held), got) == nil && len(got.Finalizers) == 1
	})
	if err := c.Delete(t.Context(), held); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the object finalized, then gone", func() bool {
		_, done := finalized.Load("held")
		return done && apierrors.IsNotFound(c.Get(context.Background(), client.ObjectKeyFromObject(held), &corev1.ConfigMap{}))
	})
}

// The watcher's --pprof serves Go's profiles beside /metrics, and only with
// it; a forced collection (heap?gc=1) answers.
func TestWatcherServesProfilesWithPprof(t *testing.T) {
	ns := env.Namespace(t)
	get := func(url string) (int, string) {
		resp, err := http.Get(url)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	for _, pprof := range []bool{false, true} {
		m := vigil.NewModule("profiled", vigil.Options{Namespace: ns})
		vigil.Watch(m.Capability("cms"), vigil.Metadata("", "v1", "ConfigMap")).InNamespace(ns).
			Reconcile(func(context.Context, *metav1.PartialObjectMetadata) error { return nil })
		addr := vigiltest.FreeAddr(t)
		flags := []string{"--leader-elect=false", "--metrics-addr", addr}
		if pprof {
			flags = append(flags, "--pprof")
		}
		stop := testkit.RunWatcher(t, m, kubeconfig(t), flags...)
		if code, body := get("http://" + addr + "/metrics"); code != http.StatusOK || !strings.Contains(body, "go_memstats_heap_alloc_bytes") {
			t.Fatalf("--pprof=%t: /metrics answered %d without the heap's size", pprof, code)
		}
		code, body := get("http://" + addr + "/debug/pprof/heap?gc=1&debug=1")
		if pprof && (code != http.StatusOK || !strings.Contains(body, "heap profile")) {
			t.Fatalf("with --pprof: /debug/pprof/heap answered %d %.200q, want the heap profile", code, body)
		}
		if !pprof && code == http.StatusOK {
			t.Fatal("without --pprof: /debug/pprof/heap answered 200, want no profiles")
		}
		stop()
	}
}
