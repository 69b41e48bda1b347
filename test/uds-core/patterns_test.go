package udscore

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/internal/testsupport/udscore"
	"github.com/vigilkit/vigil/vigiltest"
)

// Tried as a tenant while the ClusterConfig allows
// all namespaces' Exemptions. A matcher.name of `[a-z]{0,1000}` a thousand
// times (13 KB, which RE2 accepts and compiles to 80 MB and more) and an
// Exemption of two of them (26 KB), even as a dry run, are refused at once,
// the denial naming the budget; twelve Exemptions of 4 KB names stored
// while the module was down are not compiled by the Pod reviews that read
// them. Admission's peak resident memory grows by far less than one such
// name compiled, and it keeps admitting Pods.
func TestTenantMatcherNamesAreCompiledWithinABudget(t *testing.T) {
	ctx := t.Context()
	udscore.InstallCRDs(t, env, udsCoreDir)
	apps := env.Namespace(t)
	// Stored while the module is down, so never validated: each entry
	// names the tenant's namespace, where her Pods are reviewed.
	stored := strings.Repeat("[a-z]{0,1000}", 300) // 3.9 KB
	for i := range 12 {
		if err := env.Client.Create(ctx, exemptionOf(apps, fmt.Sprint("stored-", i), apps, stored+fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	m := startUDSCore(t)
	udscore.Vouch(t, env, apps) // made for her by an admin before the install: her Exemptions may name it
	adm := m.AdmissionPod().Process("admission")
	before := adm.Memory("VmHWM")
	if before == 0 {
		t.Fatalf("no VmHWM for the admission process (pid %d)", adm.Pid())
	}
	setAllowAll(t, true)
	t.Cleanup(func() { setAllowAll(t, false) })
	tenant := tenantClient(t, apps)
	vigiltest.Eventually(t, 10*time.Second, func() error { // all namespaces count
		return tenant.Create(ctx, exemptionOf(apps, "ok", apps, "^ok-.*"))
	})

	// Every Pod of hers is reviewed against the stored Exemptions.
	for i := range 3 {
		if err := tenant.Create(ctx, podIn(apps, fmt.Sprint("web-", i))); err != nil {
			t.Fatalf("an ordinary Pod of the tenant's, her stored Exemptions in the cache: %v", err)
		}
	}
	if err := tenant.Create(ctx, privilegedPod(apps, "ok-1")); err != nil {
		t.Fatalf("a privileged Pod her valid Exemption names: %v", err)
	}

	huge := strings.Repeat("[a-z]{0,1000}", 1000)
	for _, c := range []struct {
		what string
		ex   *unstructured.Unstructured
		opts []client.CreateOption
	}{
		{"an Exemption whose name is 13 KB", exemptionOf(apps, "huge", apps, huge), nil},
		{"an Exemption of 26 KB, as a dry run", exemptionOf(apps, "huger", apps, huge, huge+"x"), []client.CreateOption{client.DryRunAll}},
		{"an Exemption of 4 KB", exemptionOf(apps, "four", apps, stored), nil},
	} {
		began := time.Now()
		err := tenant.Create(ctx, c.ex, c.opts...)
		t.Logf("%s: refused in %s: %v", c.what, time.Since(began).Round(time.Millisecond), err)
		denied(t, c.what, err, "over the budget of")
	}
	if err := tenant.Create(ctx, podIn(apps, "after")); err != nil {
		t.Fatalf("an ordinary Pod after the refusals: %v", err)
	}
	select {
	case <-adm.Exited():
		t.Fatalf("the admission process exited:\n%s", adm.Output)
	default:
	}
	after := adm.Memory("VmHWM")
	t.Logf("admission's peak resident memory: %d MiB before the tenant's names were reviewed, %d MiB after", before>>10, after>>10)
	if grew := (after - before) << 10; grew > 48<<20 {
		t.Errorf("admission's peak resident memory grew by %d MiB while it reviewed the tenant's names: it compiled them", grew>>20)
	}
}
