package udscore

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vigilkit/vigil/internal/testsupport/udscore"
	"github.com/vigilkit/vigil/vigiltest"
	"github.com/vigilkit/vigil/vigiltest/fault"
)

// raceResult is what soakExemptionRace measured.
type raceResult struct {
	trials, falseDenials, failures int
	applies                        []time.Duration
	firstFailure                   string
	// rechangedDenials are denials made on the lagging cache that the
	// recheck on fresh data turned into allows.
	rechangedDenials int
}

// soakExemptionRace is the race of the discussion vigil started from, on
// UDS Core's own policy engine: trials times, one `kubectl apply -f` of an
// Exemption and the privileged Pod it exempts (the Exemption first, as a
// Helm chart orders them), by workers at once, while the module's watch
// events are held back by watchDelay, so its cache of Exemptions lags the
// API server. A Pod denied is a false denial.
func soakExemptionRace(t testing.TB, trials, workers int, watchDelay time.Duration) raceResult {
	// The module reads the API server as its ServiceAccount, through a
	// proxy that holds its watch events back.
	proxy, err := fault.NewProxy(env.AsServiceAccountConfig(udscore.Namespace, "uds-core"), fault.Options{WatchDelay: watchDelay})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	kc := vigiltest.WriteKubeConfig(t, proxy.Config())
	m := startUDSCoreWith(t, vigiltest.ModuleOptions{Args: map[string][]string{"admission": {"--kubeconfig", kc, "--shutdown-delay", "0s"}}})
	// The namespace the Pods go to, created and vouched for once the module
	// is installed.
	if err := env.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "race"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	udscore.Vouch(t, env, "race")
	metrics := "http://" + m.AdmissionPod().Ports["metrics"] + "/metrics"
	kubectl := filepath.Join(env.BinDir, "kubectl")
	admin := env.KubeConfigFile(t)

	var mu sync.Mutex
	r := raceResult{trials: trials}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= trials {
					return
				}
				name := fmt.Sprintf("race-%d", i)
				doc := fmt.Sprintf(`apiVersion: uds.dev/v1alpha1
kind: Exemption
metadata:
  name: %[1]s
  namespace: %[2]s
spec:
  exemptions:
  - policies: [DisallowPrivileged]
    matcher: {namespace: race, name: "^%[1]s$", kind: pod}
---
apiVersion: v1
kind: Pod
metadata:
  name: %[1]s
  namespace: race
spec:
  containers:
  - name: c
    image: 127.0.0.1/fake
    securityContext: {privileged: true}
`, name, udscore.ExemptionsNamespace)
				cmd := exec.Command(kubectl, "--kubeconfig", admin, "apply", "-f", "-")
				cmd.Stdin = strings.NewReader(doc)
				var out bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, &out
				began := time.Now()
				err := cmd.Run()
				took := time.Since(began)
				mu.Lock()
				r.applies = append(r.applies, took)
				switch {
				case err == nil:
				case strings.Contains(out.String(), "Privilege escalation is disallowed"):
					r.falseDenials++
					if r.firstFailure == "" {
						r.firstFailure = out.String()
					}
				default:
					r.failures++
					if r.firstFailure == "" {
						r.firstFailure = out.String()
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.Sort(r.applies)
	// Denials the lagging cache made and fresh data turned into allows.
	r.rechangedDenials = int(metric(t, metrics, `vigil_admission_rechecks_total{binding="disallow-privileged",capability="`+udscore.Capability+`",module="uds-core",outcome="changed"}`))
	return r
}

// An Exemption and the privileged Pod it exempts in one `kubectl apply -f`,
// the module's cache of Exemptions lagging by 250 ms: no Pod is denied (a
// denial is made again on fresh data).
func TestAnExemptionAppliedWithThePodItExempts(t *testing.T) {
	r := soakExemptionRace(t, 12, 3, 250*time.Millisecond)
	if r.falseDenials != 0 || r.failures != 0 {
		t.Fatalf("%d of %d applies denied the Pod, %d failed otherwise; first:\n%s", r.falseDenials, r.trials, r.failures, r.firstFailure)
	}
	t.Logf("%d of %d Pods were first denied on the lagging cache and admitted on fresh data", r.rechangedDenials, r.trials)
	if r.rechangedDenials == 0 {
		t.Errorf("no decision was made on the lagging cache: the race was not run")
	}
}

// BenchmarkSoakUDSExemptions (make soak-uds): SOAK_UDS_TRIALS (300 by
// default) applies of an Exemption with the Pod it exempts, 8 at a time,
// the module's watch events held back 250 ms. Run with -benchtime 1x.
func BenchmarkSoakUDSExemptions(b *testing.B) {
	trials := 300
	if s := os.Getenv("SOAK_UDS_TRIALS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("SOAK_UDS_TRIALS=%q: want a positive count", s)
		}
		trials = n
	}
	r := soakExemptionRace(b, trials, 8, 250*time.Millisecond)
	pct := func(p int) float64 { return float64(r.applies[(len(r.applies)-1)*p/100]) / float64(time.Millisecond) }
	fmt.Printf("uds-exemptions: trials=%d false_denials=%d failures=%d stale_cache_denials=%d apply_p50=%.0fms apply_p99=%.0fms\n",
		r.trials, r.falseDenials, r.failures, r.rechangedDenials, pct(50), pct(99))
	if r.falseDenials != 0 || r.failures != 0 {
		b.Errorf("first failure:\n%s", r.firstFailure)
	}
}

// metric reads one series' value from a Prometheus /metrics page; 0 when
// the page has no such series.
func metric(t testing.TB, url, series string) float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %s: %v", url, series, err)
			}
			return f
		}
	}
	return 0
}
