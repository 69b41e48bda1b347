package admission

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/commands/modcli"
	"github.com/vigilkit/vigil/internal/testsupport/testkit"
	"github.com/vigilkit/vigil/vigiltest"
)

var widgetCRD = crdYAML("late.vigil.dev", "Widget", "widgets", "widget")

// A watcher and an admission role whose informers read a kind no CRD serves
// yet (a scoped Lister and a Reconcile of it) wait for it instead of
// exiting: live, not ready, their /readyz naming the kind, an Event on
// their Pod; once the CRD is installed they start, and the Reconcile sees
// the kind's objects. Before, controller-runtime's cache refused to be made
// ("failed to determine if *unstructured.Unstructured is namespaced") and
// the process exited 1, to crash-loop until the CRD came.
func TestRolesWaitForTheKindsTheyRead(t *testing.T) {
	ns := env.Namespace(t)
	c := newClient(t)
	widget := func() *unstructured.Unstructured { return vigil.Kind("late.vigil.dev", "v1", "Widget") }
	m := vigil.NewModule("late", vigil.Options{Namespace: ns})
	widgets := vigil.NewLister(m, widget()).InNamespace(ns)
	policy := m.Capability("policy")
	vigil.When(policy, &corev1.ConfigMap{}).IsCreated().WithLabel("guarded").
		Validate(func(ctx context.Context, r *vigil.Request[*corev1.ConfigMap]) vigil.Verdict {
			if _, err := widgets.Get(ctx, r.Namespace, r.Name); err != nil {
				return admission.Deny("no widget " + r.Name)
			}
			return admission.Allow()
		})
	var reconciled atomic.Int32
	vigil.Watch(policy, widget()).Reconcile(func(ctx context.Context, w *unstructured.Unstructured) error {
		if w.GetNamespace() == ns {
			reconciled.Add(1)
		}
		return nil
	})
	// Events go to the Pod the downward API names.
	t.Setenv("POD_NAME", "late-0")
	t.Setenv("POD_NAMESPACE", ns)
	t.Setenv(modcli.EnvHandoffDir, t.TempDir())

	ctx, cancel := context.WithCancel(context.Background())
	probe := vigiltest.FreeAddr(t)
	watcherExit := make(chan int, 1)
	go func() {
		watcherExit <- vigil.Execute(ctx, m, []string{"watcher", "--kubeconfig", kubeconfig(t), "--metrics-addr=", "--probe-addr", probe, "--leader-elect=false"})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-watcherExit:
			if code != 0 {
				t.Errorf("watcher exited %d at its stop", code)
			}
		case <-time.After(30 * time.Second):
			t.Error("watcher did not stop within 30s")
		}
	})
	ca, certDir := testkit.ServingDir(t)
	addr := vigiltest.FreeAddr(t)
	testkit.RunAdmission(t, m, addr, "--cert-dir", certDir, "--kubeconfig", kubeconfig(t), "--shutdown-delay", "0s")
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}}}
	get := func(url string) (int, string) {
		resp, err := hc.Get(url)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	stillRunning := func() {
		t.Helper()
		select {
		case code := <-watcherExit:
			t.Fatalf("the watcher exited %d while its kind was not served: want it to wait", code)
		default:
		}
	}
	const waitingFor = "waiting"
	const kind = "Widget.v1.late.vigil.dev"
	probes := map[string]string{"watcher": "http://" + probe + "/readyz", "admission": "https://" + addr + "/readyz"}
	for role, url := range probes {
		vigiltest.Eventually(t, 20*time.Second, func() error {
			stillRunning()
			code, body := get(url)
			if code != http.StatusServiceUnavailable || !strings.Contains(body, waitingFor) || !strings.Contains(body, kind) {
				return fmt.Errorf("%s /readyz: %d %q, want 503 saying it waits for %s", role, code, body, kind)
			}
			return nil
		})
	}
	if code, body := get("http://" + probe + "/healthz"); code != http.StatusOK {
		t.Fatalf("the waiting watcher's /healthz: %d %q, want 200: waiting is not a reason to restart it", code, body)
	}
	// Long enough for a role that exits to have exited.
	time.Sleep(2 * time.Second)
	stillRunning()
	vigiltest.Eventually(t, 10*time.Second, func() error {
		var evs corev1.EventList
		if err := c.List(t.Context(), &evs, client.InNamespace(ns)); err != nil {
			return err
		}
		sources := map[string]bool{}
		for _, e := range evs.Items {
			if e.Reason == "WaitingForKind" && e.InvolvedObject.Name == "late-0" && strings.Contains(e.Message, kind) {
				sources[e.Source.Component] = true
			}
		}
		if !sources["late-watcher"] || !sources["late-admission"] {
			return fmt.Errorf("WaitingForKind Events on the Pod from %v, want late-watcher and late-admission", sources)
		}
		return nil
	})

	if err := env.InstallCRDYAML([]byte(widgetCRD)); err != nil {
		t.Fatal(err)
	}
	for role, url := range probes {
		vigiltest.Eventually(t, 30*time.Second, func() error {
			stillRunning()
			if code, body := get(url); code != http.StatusOK {
				return fmt.Errorf("%s /readyz after the CRD: %d %q, want 200", role, code, body)
			}
			return nil
		})
	}
	w := widget()
	w.SetNamespace(ns)
	w.SetName("first")
	if err := c.Create(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the Reconcile of the late kind sees its object", func() bool { return reconciled.Load() > 0 })
}
