package vigiltest_test

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vigilkit/vigil/vigiltest"
)

// Two admission replicas behind one address, as a Deployment's behind its
// Service: the API server's connections are spread over both, and once one
// stops, the other answers every review.
func TestAdmissionReplicasShareTheWebhook(t *testing.T) {
	if err := env.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kitApps}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	m := env.InstallModule(t, vigiltest.ModuleOptions{Dir: "./testdata/kit", AdmissionReplicas: 2})
	settings := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: m.Name + "-config"}}
	if err := env.Client.Create(t.Context(), settings); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	m.StartAdmission(60 * time.Second)
	pods := m.AdmissionPods()
	if len(pods) != 2 || pods[0] != m.AdmissionPod() || pods[0].Ports["https"] == pods[1].Ports["https"] {
		t.Fatalf("admission pods %v: want 2, the first AdmissionPod, each on its own port", pods)
	}

	// Creates at once, from 8 clients: the API server opens connections
	// for them, which the Service spreads over both replicas.
	suffix := randSuffix(t)
	create := func(name string) error {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: kitApps, Name: name, Labels: map[string]string{"app": "shop"}}}
		if err := env.Client.Create(t.Context(), cm); err != nil {
			return fmt.Errorf("create %s: %w", name, err)
		}
		if cm.Labels["checked"] != "true" {
			return fmt.Errorf("%s created with labels %v: the mutation did not run", name, cm.Labels)
		}
		return nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for w := range 8 {
		wg.Go(func() {
			for i := range 5 {
				if err := create(fmt.Sprintf("r-%s-%d-%d", suffix, w, i)); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i, p := range pods {
		if n := connections(t, p); n < 1 {
			t.Errorf("replica %d (%s) accepted %v connections through 40 creates from 8 clients; want the Service to send it some", i, p.Name, n)
		}
	}

	// One replica stops, as in a rollout: every review is answered by the
	// other, none by the failure policy.
	pods[1].Stop()
	for i := range 20 {
		if err := create(fmt.Sprintf("s-%s-%d", suffix, i)); err != nil {
			t.Error(err)
		}
	}
	msg := vigiltest.Denied(t, env.Client, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: kitApps, Name: "bad-" + suffix}}, "has no app label")
	if !strings.Contains(msg, "has no app label") {
		t.Errorf("denial %q with one replica left: want the module's message", msg)
	}

	// Started again, the module brings back the stopped replica, behind the
	// same address, and leaves the running one as it is.
	first, stopped := pods[0].Process("admission"), pods[1].Process("admission")
	m.StartAdmission(60 * time.Second)
	again := m.AdmissionPods()
	if len(again) != 2 || again[0] != pods[0] || again[1] != pods[1] {
		t.Fatalf("after a second start: %d admission pods %v, want the same 2 as before", len(again), again)
	}
	if pods[0].Process("admission") != first {
		t.Error("the second start ran the running replica again")
	}
	if p := pods[1].Process("admission"); p == stopped || p.Pid() == stopped.Pid() {
		t.Error("the second start did not bring back the stopped replica")
	}
	if err := create("after-restart-" + suffix); err != nil {
		t.Error(err)
	}
}

// connections is vigil_admission_connections_total of the pod's admission.
func connections(t *testing.T, p *vigiltest.Pod) float64 {
	t.Helper()
	resp, err := http.Get("http://" + p.Ports["metrics"] + "/metrics")
	if err != nil {
		t.Fatalf("metrics of %s: %v", p.Name, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "vigil_admission_connections_total") {
			f := strings.Fields(line)
			n, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err != nil {
				t.Fatalf("metrics of %s: %q: %v", p.Name, line, err)
			}
			return n
		}
	}
	t.Fatalf("metrics of %s have no vigil_admission_connections_total", p.Name)
	return 0
}
