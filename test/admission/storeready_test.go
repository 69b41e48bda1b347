package admission

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/commands/modcli"
	"github.com/vigilkit/vigil/internal/testsupport/testkit"
	"github.com/vigilkit/vigil/store"
	"github.com/vigilkit/vigil/store/v1alpha1"
	"github.com/vigilkit/vigil/vigiltest"
)

// OnStoreReady, Pepr's Store.onReady: each admission and watcher replica
// calls the module's functions once its Store has synced, with what the
// Store held before it started and a handler's context; a function that
// panics is logged and the next still runs.
func TestOnStoreReadyRunsInEveryReplica(t *testing.T) {
	ns := env.Namespace(t)
	const module = "ready"
	// Written as an admin writes the object, with no informer of the test's
	// own running while the roles start.
	crd, err := store.CRD()
	if err != nil {
		t.Fatal(err)
	}
	if err := env.InstallCRDs(crd); err != nil {
		t.Fatal(err)
	}
	seeded := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(), "kind": "Store",
		"metadata": map[string]any{"name": module, "namespace": ns},
		"data":     map[string]any{"greeting": "hello"},
	}}
	if err := env.Client.Create(t.Context(), seeded); err != nil {
		t.Fatal(err)
	}
	m := vigil.NewModule(module, vigil.Options{Namespace: ns})
	c := m.Capability("c")
	vigil.When(c, &corev1.ConfigMap{}).IsCreated().Validate(func(context.Context, *vigil.Request[*corev1.ConfigMap]) vigil.Verdict { return admission.Allow() })
	vigil.Watch(c, &corev1.ConfigMap{}).OnEvent(func(context.Context, *corev1.ConfigMap, vigil.WatchEvent) {})
	var mu sync.Mutex
	var calls []string
	m.OnStoreReady(func(context.Context, vigil.Store) { panic("the first function fails") })
	m.OnStoreReady(func(ctx context.Context, s vigil.Store) {
		v, found, err := s.Get("greeting")
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, strings.Join([]string{v, func() string {
			if found && err == nil && vigil.ClientFrom(ctx) != nil && vigil.StoreFrom(ctx) != nil {
				return "with a handler's context"
			}
			return "without"
		}()}, " "))
	})
	callsNow := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), calls...)
	}

	testkit.RunWatcher(t, m, kubeconfig(t), "--leader-elect=false")
	testkit.Eventually(t, 10*time.Second, "the watcher's call", func() bool { return len(callsNow()) == 1 })

	_, certDir := testkit.ServingDir(t)
	t.Setenv(modcli.EnvHandoffDir, t.TempDir())
	testkit.RunAdmission(t, m, vigiltest.FreeAddr(t), "--cert-dir", certDir, "--kubeconfig", kubeconfig(t), "--shutdown-delay", "0s", "--register=false")
	testkit.Eventually(t, 20*time.Second, "the admission replica's call", func() bool { return len(callsNow()) == 2 })
	time.Sleep(300 * time.Millisecond)
	for _, got := range callsNow() {
		if got != "hello with a handler's context" {
			t.Errorf("OnStoreReady saw %q, want the greeting the Store held, with a handler's context", got)
		}
	}
	if n := len(callsNow()); n != 2 {
		t.Errorf("OnStoreReady ran %d times in two replicas, want once each", n)
	}

	nilModule := vigil.NewModule("ready-nil", vigil.Options{})
	nilModule.OnStoreReady(nil)
	if err := nilModule.Verify(); err == nil || !strings.Contains(err.Error(), "storeready_test.go:") || !strings.Contains(err.Error(), "OnStoreReady(nil)") {
		t.Errorf("Verify() = %v, want OnStoreReady(nil) refused at its call site", err)
	}
}
