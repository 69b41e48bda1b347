package clusterconfig

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/vigiltest"
)

// tenantUser is a client of a user who may create namespaces' worth of
// self-service content in namespace ns only: Pods and Exemptions.
func tenantUser(t *testing.T, ns string) client.Client {
	t.Helper()
	return env.AsTenant(t, ns, "tenant-"+ns,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create", "get", "list", "delete"}},
		rbacv1.PolicyRule{APIGroups: []string{group}, Resources: []string{"exemptions"}, Verbs: []string{"create", "get", "list", "update", "delete"}},
	)
}

// exemption is an Exemption in ns whose one entry exempts pods of podNS
// named by expr from DisallowPrivileged, its description padded to pad bytes.
func exemption(ns, name, podNS, expr string, pad int) *unstructured.Unstructured {
	ex := vigil.Kind(group, version, "Exemption")
	ex.SetNamespace(ns)
	ex.SetName(name)
	ex.Object["spec"] = map[string]any{"exemptions": []any{map[string]any{
		"title":       name,
		"description": strings.Repeat("x", pad),
		"matcher":     map[string]any{"namespace": podNS, "name": expr},
		"policies":    []any{PolicyPrivileged},
	}}}
	return ex
}

// installCRDs installs the module's CRDs and removes any ClusterConfig
// "initial" another test left: each test says what it holds.
func installCRDs(t *testing.T) {
	t.Helper()
	crds, err := os.ReadFile(moduleFile("crds.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := env.InstallCRDYAML(crds); err != nil {
		t.Fatal(err)
	}
	cc := vigil.Kind(group, version, "ClusterConfig")
	cc.SetName("initial")
	if err := env.Client.Delete(t.Context(), cc); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	vigiltest.Eventually(t, 10*time.Second, func() error {
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(cc), cc); !apierrors.IsNotFound(err) {
			return fmt.Errorf("ClusterConfig initial still there (%v)", err)
		}
		return nil
	})
}

// installModule installs the module as it ships, its exemptions namespace
// trusted, with its defaults Secret.
func installModule(t *testing.T, trusted string) *vigiltest.Module {
	t.Helper()
	m := env.InstallModule(t, vigiltest.ModuleOptions{Dir: moduleDir, Env: []string{
		"CLUSTERCONFIG_EXEMPTIONS_NAMESPACE=" + trusted, "CLUSTERCONFIG_TIMEOUT=1s",
	}})
	defaults, err := os.ReadFile(moduleFile("defaults.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: DefaultsSecret}, Data: map[string][]byte{DefaultsKey: defaults}}
	if err := env.Client.Delete(t.Context(), secret.DeepCopy()); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err) // another test's
	}
	if err := env.Client.Create(t.Context(), secret); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), secret) })
	return m
}

// Finding 8 of issue 23: a tenant fills her own namespace with Exemptions
// of 1 MB each (CLUSTERCONFIG_LOAD_EXEMPTIONS of them, 60 by default; the
// issue's 220 took a 256Mi container past its limit), before the module
// starts and while it runs. Admission, run from its manifests as its
// ServiceAccount, caches only the exemptions namespace's: its peak resident
// memory stays far below what she wrote, and Pod creates keep working — an
// ordinary one, one exempted from the exemptions namespace — while hers,
// which her own Exemptions name, are denied. Once the ClusterConfig allows
// all namespaces, privileged pods are judged on every namespace's
// Exemptions, read page by page: memory stays as bounded.
func TestTenantExemptionsDoNotFillAdmissionsMemory(t *testing.T) {
	ctx := t.Context()
	n := 60
	if v := os.Getenv("CLUSTERCONFIG_LOAD_EXEMPTIONS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("CLUSTERCONFIG_LOAD_EXEMPTIONS=%q: want a positive count", v)
		}
	}
	const size = 1 << 20
	installCRDs(t)
	trusted, apps := env.Namespace(t), env.Namespace(t)
	tenant := tenantUser(t, apps)
	load := func(from, to int) {
		for i := from; i < to; i++ {
			// A little under 1 MiB: the API server's etcd takes 1.5 MiB a write.
			if err := tenant.Create(ctx, exemption(apps, fmt.Sprint("pad-", i), apps, "^padding-.*", size-4096)); err != nil {
				t.Fatalf("the tenant's Exemption %d: %v", i, err)
			}
		}
	}
	load(0, n*3/4)
	if err := env.Client.Create(ctx, exemption(trusted, "node-exporter", apps, "^node-exporter-.*", 0)); err != nil {
		t.Fatal(err)
	}

	m := installModule(t, trusted)
	vouch(t, apps) // created before the install: its creator is unknown until an admin vouches for it
	adm := m.StartAdmission(120 * time.Second).Process("admission")
	load(n*3/4, n)

	web := pod(apps, "web", false)
	if err := env.Client.Create(ctx, web); err != nil {
		t.Fatalf("an ordinary pod, under the load: %v", err)
	}
	if web.Labels[ClusterLabel] == "" {
		t.Errorf("the ordinary pod has no label %s: it was not mutated", ClusterLabel)
	}
	if err := env.Client.Create(ctx, pod(apps, "node-exporter-1", true)); err != nil {
		t.Fatalf("a privileged pod exempted from the exemptions namespace, under the load: %v", err)
	}
	err := tenant.Create(ctx, pod(apps, "padding-1", true))
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "which policy DisallowPrivileged denies") {
		t.Fatalf("the tenant's privileged pod under her own Exemptions: %v, want it denied", err)
	}

	wrote := int64(n) * size
	// The cache of every Exemption holds each at least once decoded (more
	// while the initial list is decoded): over the load itself. Without it
	// the process stays within its own footprint.
	limit := int64(100<<20) + wrote/4
	peak := func(when string) {
		t.Helper()
		hwm := adm.Memory("VmHWM") * 1024
		t.Logf("tenant wrote %d Exemptions, %d MiB; admission's peak resident memory %s: %d MiB", n, wrote>>20, when, hwm>>20)
		if hwm == 0 {
			t.Fatalf("no VmHWM for the admission process (pid %d): it exited?\n%s", adm.Pid(), adm.Output)
		}
		if hwm > limit {
			t.Errorf("admission's peak resident memory %s %d MiB, over %d MiB: it holds the tenant's %d MiB of Exemptions", when, hwm>>20, limit>>20, wrote>>20)
		}
	}
	peak("with only the exemptions namespace's cached")

	// All namespaces' Exemptions count: a privileged pod none exempts is
	// judged on every one of them, read a page at a time, and hers, which
	// her own Exemption names, is admitted.
	cc := readYAML(t, "clusterconfig.yaml")
	_ = unstructured.SetNestedField(cc.Object, true, "spec", "policy", "allowAllNsExemptions")
	if err := env.Client.Create(ctx, cc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), cc) })
	if err := tenant.Create(ctx, pod(apps, "padding-2", true)); err != nil {
		t.Fatalf("the tenant's privileged pod under her own Exemption, all namespaces allowed: %v", err)
	}
	began := time.Now()
	for i := range 3 {
		// Denied by the policy, or — when reading them all takes longer
		// than the webhook's timeout — by the failure policy.
		err := tenant.Create(ctx, pod(apps, fmt.Sprint("unexempted-", i), true))
		if err == nil || !strings.Contains(err.Error(), "which policy DisallowPrivileged denies") && !strings.Contains(err.Error(), "(failurePolicy Fail): did not finish within") {
			t.Fatalf("a privileged pod no Exemption names, all namespaces allowed: %v, want it denied", err)
		}
	}
	t.Logf("3 privileged pods judged on every namespace's Exemptions in %s", time.Since(began).Round(time.Millisecond))
	peak("after reading every namespace's Exemptions three times")
}

// Findings 9 and 10 of issue 23, tried with the module as it ships.
//
// 10: an Exemption whose matcher.name does not compile is refused when it is
// written, naming the entry and the error; one stored while the module was
// down is reported — a log line when a pod it would concern is judged, and
// the audit's AuditViolation Event on it — and a name matches the whole pod
// name.
//
// 9: allowAllNsExemptions is read from the ClusterConfig, as fresh as the
// request: with the watcher stopped, revoking it, or deleting the
// ClusterConfig, denies the very next privileged pod that only an
// Exemption in the tenant's own namespace exempts.
func TestExemptionSettingsAndNamesAsShipped(t *testing.T) {
	ctx := t.Context()
	installCRDs(t)
	trusted, apps := env.Namespace(t), env.Namespace(t)
	cc := readYAML(t, "clusterconfig.yaml")
	if err := env.Client.Create(ctx, cc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), cc) })
	// Written while the module is down.
	stored := exemption(trusted, "stored-invalid", apps, "([a-z", 0)
	if err := env.Client.Create(ctx, stored); err != nil {
		t.Fatal(err)
	}
	m := installModule(t, trusted)
	vouch(t, apps) // created before the install: its creator is unknown until an admin vouches for it
	adm := m.StartAdmission(120 * time.Second).Process("admission")

	// 10: refused at admission, with the entry and the error.
	err := env.Client.Create(ctx, exemption(trusted, "invalid", apps, "([a-z", 0))
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `spec.exemptions[0].matcher.name "([a-z"`) {
		t.Fatalf("an Exemption whose name does not compile: %v, want it refused naming the entry", err)
	}
	if err := env.Client.Create(ctx, exemption(trusted, "debug", apps, "debug", 0)); err != nil {
		t.Fatalf("a valid Exemption: %v", err)
	}
	tenant := tenantUser(t, apps)
	vigiltest.Eventually(t, 10*time.Second, func() error { // the lister takes it in
		return tenant.Create(ctx, pod(apps, "debug", true))
	})
	if err := tenant.Create(ctx, pod(apps, "totally-not-debug-but-root", true)); !apierrors.IsForbidden(err) {
		t.Fatalf("an admin's `debug` exempted totally-not-debug-but-root: %v, want it denied", err)
	}
	if out := adm.Output.String(); !strings.Contains(out, "its matcher.name is not a valid expression") ||
		!strings.Contains(out, trusted+`/stored-invalid: spec.exemptions[0].matcher.name \"([a-z\"`) {
		t.Errorf("admission did not log the stored Exemption whose name does not compile:\n%s", out)
	}

	// 9: the tenant's own Exemption counts only while the ClusterConfig
	// allows all namespaces.
	if err := tenant.Create(ctx, exemption(apps, "own", apps, "^own-.*", 0)); err != nil {
		t.Fatal(err)
	}
	own := 0
	privileged := func() error {
		own++
		return tenant.Create(ctx, pod(apps, fmt.Sprint("own-", own), true))
	}
	if err := privileged(); !apierrors.IsForbidden(err) {
		t.Fatalf("the tenant's own Exemption, before the ClusterConfig allows all: %v, want it denied", err)
	}
	allowAll := func(on bool) {
		t.Helper()
		patch := fmt.Sprintf(`{"spec":{"policy":{"allowAllNsExemptions":%v}}}`, on)
		if err := env.Client.Patch(ctx, cc, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			t.Fatal(err)
		}
	}
	w := m.StartWatcher(60 * time.Second)
	// The audit reports the stored Exemption whose name does not compile.
	vigiltest.Eventually(t, 30*time.Second, func() error {
		events := &corev1.EventList{}
		if err := env.Client.List(ctx, events, client.InNamespace(trusted)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == "stored-invalid" && e.Reason == "AuditViolation" && strings.Contains(e.Message, `matcher.name "([a-z"`) {
				return nil
			}
		}
		return fmt.Errorf("no AuditViolation Event on Exemption %s/stored-invalid among %d Events", trusted, len(events.Items))
	})
	allowAll(true)
	vigiltest.Eventually(t, 20*time.Second, privileged)
	// The watcher goes down: the Store's copy it wrote says "allow all".
	w.Stop()
	allowAll(false)
	if err := privileged(); !apierrors.IsForbidden(err) {
		t.Fatalf("the next privileged pod after allowAllNsExemptions was revoked, the watcher down: %v, want it denied", err)
	}
	allowAll(true)
	if err := privileged(); err != nil {
		t.Fatalf("the next privileged pod after allowAllNsExemptions was set again, the watcher down: %v, want it admitted", err)
	}
	if err := env.Client.Delete(ctx, cc); err != nil {
		t.Fatal(err)
	}
	if err := privileged(); !apierrors.IsForbidden(err) {
		t.Fatalf("the next privileged pod after the ClusterConfig was deleted (the defaults do not allow all): %v, want it denied", err)
	}
}
