package clusterconfig

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Tried as a tenant while the ClusterConfig allows
// all namespaces' Exemptions: her Exemption has 400 entries of (a+)+b, which
// backtracks for a long while on a name of a's, and she keeps creating
// privileged Pods named a×40. Each of her reviews stops at its budget, and
// the admins' own exempted node-exporter Pods of another namespace are
// admitted meanwhile. Her name of 13 KB is refused for its length.
func TestATenantsBacktrackingNamesHoldNoOneElsesPods(t *testing.T) {
	ctx := t.Context()
	installCRDs(t)
	trusted, apps, monitoring := env.Namespace(t), env.Namespace(t), env.Namespace(t)
	cc := readYAML(t, "clusterconfig.yaml")
	_ = unstructured.SetNestedField(cc.Object, true, "spec", "policy", "allowAllNsExemptions")
	if err := env.Client.Create(ctx, cc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), cc) })
	if err := env.Client.Create(ctx, exemption(trusted, "node-exporter", monitoring, "^node-exporter-.*", 0)); err != nil {
		t.Fatal(err)
	}
	m := installModule(t, trusted)
	// Made by an admin before the install: the admins' monitoring, and hers,
	// which her Exemptions may name (so that her names are matched at all).
	vouch(t, monitoring)
	vouch(t, apps)
	m.StartAdmission(120 * time.Second)

	tenant := tenantUser(t, apps)
	huge := strings.Repeat("[a-z]{0,1000}", 1000)
	err := tenant.Create(ctx, exemption(apps, "huge", apps, huge, 0))
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "13000 bytes long, over the budget of 1024") {
		t.Errorf("the tenant's Exemption whose name is 13 KB: %v, want it refused for its length", err)
	}
	backtracks := exemption(apps, "backtracks", apps, "(a+)+b", 0)
	entries, _, _ := unstructured.NestedSlice(backtracks.Object, "spec", "exemptions")
	for len(entries) < 400 {
		entries = append(entries, entries[0])
	}
	_ = unstructured.SetNestedSlice(backtracks.Object, entries, "spec", "exemptions")
	if err := tenant.Create(ctx, backtracks); err != nil {
		t.Fatal(err)
	}

	// Her Pods, two at a time, until the admins' are in.
	name := strings.Repeat("a", 40)
	done := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var hers []error
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				err := tenant.Create(context.Background(), pod(apps, name, true))
				mu.Lock()
				hers = append(hers, err)
				mu.Unlock()
				if err == nil {
					return
				}
			}
		})
	}
	time.Sleep(time.Second) // hers are under review
	for i := range 3 {
		began := time.Now()
		err := env.Client.Create(ctx, pod(monitoring, fmt.Sprint("node-exporter-", i), true))
		t.Logf("the admins' exempted Pod %d, the tenant's under review: %v in %s", i, err, time.Since(began).Round(time.Millisecond))
		if err != nil {
			t.Errorf("the admins' exempted Pod %s/node-exporter-%d, while the tenant's were reviewed: %v, want it admitted", monitoring, i, err)
		}
	}
	close(done)
	wg.Wait()
	for _, err := range hers {
		if err == nil || !strings.Contains(err.Error(), "matching stopped") && !strings.Contains(err.Error(), "waiting for another read") {
			t.Errorf("the tenant's privileged Pod %s, which her backtracking Exemption does not name: %v, want it denied once its budget is spent", name, err)
		}
	}
	t.Logf("the tenant's %d Pods were denied; the first: %v", len(hers), hers[0])
}
