package soak_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/serving/registration"
)

// floodConns is how many connections the upgrade soak's flood holds to each
// replica: more than the webhook server's MaxConns (512).
// The flood comes from 127.0.0.2 (bench.Flood's default), as one Pod would.
const floodConns = 600

// violationLoop creates ConfigMaps labelled violate in ns, which the
// module's policy must deny, through the soaks' create loop until stop,
// counting the tries and those admitted.
func violationLoop(ctx context.Context, ns string, tries, admitted *atomic.Int64) (stop func()) {
	return createLoop(ctx, ns, "violate", map[string]string{"violate": "yes"}, func(_ *corev1.ConfigMap, err error, _, _ time.Time) {
		tries.Add(1)
		if err == nil {
			admitted.Add(1)
		}
	})
}

// ignoreWindow reads the module's two configurations every 10 ms until
// stop, from the first time they enforce, and adds to total the time any
// of their webhooks but the canary was failurePolicy Ignore (as seen by
// the reads: a window shorter than a read's interval may be missed or
// counted as one interval).
func ignoreWindow(ctx context.Context, module string, total *time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		enforced := false
		last := time.Now()
		for {
			select {
			case <-done:
				return
			case <-time.After(10 * time.Millisecond):
			}
			now := time.Now()
			ignored := false
			mut := &admissionregistrationv1.MutatingWebhookConfiguration{}
			val := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			if env.Client.Get(ctx, client.ObjectKey{Name: module}, mut) != nil || env.Client.Get(ctx, client.ObjectKey{Name: module}, val) != nil {
				last = now
				continue
			}
			var rec registration.Record
			_ = json.Unmarshal([]byte(mut.Annotations[registration.Annotation]), &rec)
			enforced = enforced || rec.State == registration.StateEnforced
			for _, w := range mut.Webhooks {
				ignored = ignored || (!spec.IsCanary(w.Name) && ptr.Deref(w.FailurePolicy, admissionregistrationv1.Fail) == admissionregistrationv1.Ignore)
			}
			for _, w := range val.Webhooks {
				ignored = ignored || (!spec.IsCanary(w.Name) && ptr.Deref(w.FailurePolicy, admissionregistrationv1.Fail) == admissionregistrationv1.Ignore)
			}
			if enforced && ignored {
				*total += now.Sub(last)
			}
			last = now
		}
	}()
	return func() { close(done); wg.Wait() }
}

// BenchmarkSoakUpgradeFlood is the upgrade soak with a flood, alone: what
// BenchmarkSoakRegistration runs last. Run with -benchtime 1x.
func BenchmarkSoakUpgradeFlood(b *testing.B) {
	res := soakUpgrade(b, "helm", true)
	fmt.Printf("upgrade-flood: upgrade_flood_creates=%d upgrade_flood_rejected=%d upgrade_flood_unmutated=%d upgrade_flood_admitted_violations=%d/%d upgrade_flood_conns_dialed=%d upgrade_flood_ignore_window_ms=%d\n",
		res.creates, res.rejected, res.unmutated, res.violations, res.violationTries, res.floodDialed, res.ignoreWindow.Milliseconds())
}
