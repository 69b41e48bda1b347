package node

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/vigilkit/vigil/internal/operating/monitor"
	"github.com/vigilkit/vigil/internal/operating/status"
)

// statusWhileStarting reads vigil status of the uds-core module while its
// pods wait in gate phase 0 for its CRDs: each starting pod is named with
// its phase, init container, since when, and its gate's last Event. It
// returns how many pods it reported starting.
func statusWhileStarting(t *testing.T, cs kubernetes.Interface) int {
	t.Helper()
	var r *status.Report
	waitUntil(t, 30*time.Second, "vigil status to report the starting pods' gates", func() error {
		var err error
		r, err = status.Collect(t.Context(), status.Clients{Kube: cs}, status.Options{Module: "uds-core"})
		if err != nil {
			return err
		}
		if len(r.Modules) != 1 || len(r.Modules[0].Starting) == 0 {
			deps, _ := cs.AppsV1().Deployments("").List(t.Context(), metav1.ListOptions{})
			var seen []string
			for _, d := range deps.Items {
				seen = append(seen, fmt.Sprintf("%s/%s %v", d.Namespace, d.Name, d.Labels))
			}
			return fmt.Errorf("status %+v (missing %v): want module uds-core with starting pods; Deployments: %v", r.Modules, r.Missing, seen)
		}
		for _, p := range r.Modules[0].Starting {
			if p.Phase != 0 || p.InitContainer != "gate-phase-0" || p.Gate == nil || p.Since == nil || len(p.Waits) == 0 || p.Waits[0].LastSeen == "" {
				return fmt.Errorf("starting pod %+v: want it in phase 0 (gate-phase-0), with its gate's last Event and what it last saw", p)
			}
		}
		return nil
	})
	var b strings.Builder
	if err := status.Write(&b, r, time.Now()); err != nil {
		t.Fatal(err)
	}
	t.Logf("vigil status while the gates wait:\n%s", b.String())
	if !strings.Contains(b.String(), "in phase 0 (gate-phase-0)") || !strings.Contains(b.String(), "waits for") || !strings.Contains(b.String(), "last saw: ") {
		t.Errorf("vigil status does not say which phase and what the gate waits for:\n%s", b.String())
	}
	return len(r.Modules[0].Starting)
}

// monitorSees follows the module's decisions until it sees the denial of
// Pod name in namespace apps, within 30s; it returns how long that took.
func monitorSees(t *testing.T, cs kubernetes.Interface, moduleNS, apps, name string) time.Duration {
	t.Helper()
	began := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var got *monitor.Decision
	err := monitor.Follow(ctx, cs, monitor.Options{Module: "uds-core", Namespace: moduleNS, Since: time.Minute, Poll: 500 * time.Millisecond,
		Filter: monitor.Filter{Namespace: apps, Verdict: "denied"}}, func(d monitor.Decision) {
		if d.Name == name && got == nil {
			got = &d
			cancel()
		}
	})
	if err != nil {
		t.Fatalf("vigil monitor: %v", err)
	}
	if got == nil {
		t.Fatalf("vigil monitor did not show the denial of Pod %s in %s within 30s", name, apps)
	}
	var b strings.Builder
	monitor.Write(&b, *got)
	t.Logf("vigil monitor: %s", b.String())
	if got.Operation != "CREATE" || got.Kind != "Pod" || got.Capability == "" || got.Binding == "" || !strings.Contains(got.Message, "privileged") || got.User == "" {
		t.Errorf("decision %+v: want the CREATE of a Pod, its capability and binding, the user, and the denial's message", *got)
	}
	return time.Since(began)
}
