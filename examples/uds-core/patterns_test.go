package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/vigiltest"
)

// tenantClient is a client of a user who may create, in namespace ns only,
// Pods and Exemptions.
func tenantClient(t *testing.T, ns string) client.Client {
	t.Helper()
	return env.AsTenant(t, ns, "tenant-"+ns,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create", "get", "list", "delete"}},
		rbacv1.PolicyRule{APIGroups: []string{group}, Resources: []string{"exemptions"}, Verbs: []string{"create", "get", "list", "update", "delete"}},
	)
}

// exemptionKind is an empty Exemption, for its kind.
func exemptionKind() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "uds.dev/v1alpha1", "kind": "Exemption"}}
}

// exemptionOf is an Exemption of namespace with one DisallowPrivileged
// entry per name, each naming pods of podNS.
func exemptionOf(namespace, name, podNS string, names ...string) *unstructured.Unstructured {
	entries := make([]any, len(names))
	for i, n := range names {
		entries[i] = map[string]any{
			"policies": []any{string(DisallowPrivileged)},
			"matcher":  map[string]any{"namespace": podNS, "name": n, "kind": "pod"},
		}
	}
	ex := exemptionKind()
	ex.SetNamespace(namespace)
	ex.SetName(name)
	ex.Object["spec"] = map[string]any{"exemptions": entries}
	return ex
}

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
	udsCRDs(t)
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
	vouch(t, apps) // made for her by an admin before the install: her Exemptions may name it
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

// podIn is an ordinary Pod of namespace.
func podIn(namespace, name string) *corev1.Pod {
	p := testPod(name, nil)
	p.Namespace = namespace
	return p
}
