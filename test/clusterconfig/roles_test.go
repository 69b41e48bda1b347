package clusterconfig

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/store/v1alpha1"
	"github.com/vigilkit/vigil/vigiltest"
)

// The module's roles run as separate processes, as in its pod: the three
// phases in order — the ClusterConfig never comes in time, so phase 1 ends
// with the mounted defaults — then admission and the watcher. Admission uses
// what the gates found, consults Exemptions live, and follows the
// ClusterConfig once the watcher's Reconcile has taken it in. Exemptions count
// only from the exemptions namespace until the ClusterConfig allows all
// namespaces (policy.allowAllNsExemptions).
func TestModuleRolesAsInAPod(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	bin := vigiltest.BuildModule(t, moduleDir)
	ns := env.Namespace(t)
	apps := env.Namespace(t)
	exemptionNS := env.Namespace(t) // the module's exemptions namespace
	kc := env.KubeConfigFile(t)
	handoff := filepath.Join(dir, "handoff")
	envv := []string{
		"KUBECONFIG=" + kc, "VIGIL_HANDOFF_DIR=" + handoff, "VIGIL_NAMESPACE=" + ns,
		"CLUSTERCONFIG_DEFAULTS=" + moduleFile("defaults.yaml"), "CLUSTERCONFIG_TIMEOUT=1s",
		"CLUSTERCONFIG_EXEMPTIONS_NAMESPACE=" + exemptionNS,
	}
	gateArgs := func(phase string) []string {
		return []string{"gate", "--phase", phase, "--progress-interval", "200ms"}
	}

	plan, err := exec.Command(bin, "plan", "-o", "json").Output()
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	var p struct {
		Phases []struct {
			Gates []struct{ Name string } `json:"gates"`
		} `json:"phases"`
	}
	if err := json.Unmarshal(plan, &p); err != nil || len(p.Phases) != 3 {
		t.Fatalf("plan -o json: want 3 phases (%v):\n%s", err, plan)
	}

	// Phase 0 waits for the ClusterConfig CRD, which another test of the
	// package may have installed.
	removeCRDs(t)
	p0 := vigiltest.StartProcess(t, envv, bin, gateArgs("0")...)
	p0.WaitOutput(t, "gate waiting", 10*time.Second)
	crds, err := os.ReadFile(moduleFile("crds.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := env.InstallCRDYAML(crds); err != nil {
		t.Fatal(err)
	}
	p0.WaitOK(t, 20*time.Second)

	// Phase 1: no ClusterConfig within its second, so the defaults stand.
	p1 := vigiltest.StartProcess(t, envv, bin, gateArgs("1")...)
	p1.WaitOK(t, 20*time.Second)
	if !strings.Contains(p1.Output.String(), "gate fallback") {
		t.Errorf("phase 1 did not finish with its fallback:\n%s", p1.Output)
	}
	st := &v1alpha1.Store{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "uds-core"}, st); err != nil {
		t.Fatalf("the Store phase 1 wrote: %v", err)
	}
	if got := st.Data[keyInitialConfig]; !strings.Contains(got, `"clusterName":"unnamed-cluster"`) || !strings.Contains(got, `"adminDomain":"admin.uds.dev"`) {
		t.Errorf("Store %s = %s, want the defaults", keyInitialConfig, got)
	}

	// Phase 2 loads the Exemptions that exist.
	existing := readYAML(t, "exemption.yaml")
	existing.SetNamespace(exemptionNS)
	if err := env.Client.Create(ctx, existing); err != nil {
		t.Fatal(err)
	}
	p2 := vigiltest.StartProcess(t, envv, bin, gateArgs("2")...)
	p2.WaitOK(t, 20*time.Second)
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(st), st); err != nil {
		t.Fatal(err)
	}
	if got, want := st.Data[keyInitialExemptions], `["`+exemptionNS+`/node-exporter"]`; got != want {
		t.Errorf("Store %s = %s, want %s", keyInitialExemptions, got, want)
	}

	// Admission registers itself once ready, through a loopback URL.
	addr := vigiltest.FreeAddr(t)
	adm := vigiltest.StartProcess(t, envv, bin, "admission", "--bootstrap", "--addr", addr, "--metrics-addr", "127.0.0.1:0", "--webhook-url", "https://"+addr,
		"--cert-secret", "uds-core-tls", "--cert-hosts", "127.0.0.1", "--shutdown-delay", "10ms")
	adm.WaitOutput(t, "webhooks enforced", 30*time.Second)
	// apps was created before the install's stamp of namespace creators:
	// its creator is unknown until an admin vouches for it.
	vouch(t, apps)
	t.Cleanup(func() {
		ctx := context.Background()
		_ = env.Client.Delete(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "uds-core"}})
		_ = env.Client.Delete(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "uds-core"}})
	})

	web := pod(apps, "web", false)
	if err := env.Client.Create(ctx, web); err != nil {
		t.Fatalf("create an ordinary pod: %v", err)
	}
	if got := web.Labels[ClusterLabel]; got != "unnamed-cluster" {
		t.Errorf("pod label %s = %q, want the defaults' cluster name", ClusterLabel, got)
	}
	err = env.Client.Create(ctx, pod(apps, "debug-shell", true))
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `container "main" is privileged, which policy DisallowPrivileged denies`) {
		t.Fatalf("privileged pod: got %v, want it denied by DisallowPrivileged", err)
	}

	// Every path to the Pod is covered, tried as a user who may only work
	// with pods and their ephemeral containers in the namespace: a stripped
	// label comes back on the UPDATE, and `kubectl debug` cannot add a
	// privileged ephemeral container.
	mallory := lowRightsUser(t, apps)
	stripped := web.DeepCopy()
	delete(stripped.Labels, ClusterLabel)
	if err := mallory.Update(ctx, stripped); err != nil {
		t.Fatalf("strip the label: %v", err)
	}
	if got := stripped.Labels[ClusterLabel]; got != "unnamed-cluster" {
		t.Errorf("after stripping it, pod label %s = %q, want it back", ClusterLabel, got)
	}
	debugged := stripped.DeepCopy()
	debugged.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
		Name: "debugger", Image: "busybox", SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
	}}}
	err = mallory.SubResource("ephemeralcontainers").Update(ctx, debugged)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `container "debugger" is privileged, which policy DisallowPrivileged denies`) {
		t.Fatalf("a privileged ephemeral container: got %v, want it denied by DisallowPrivileged", err)
	}
	debugged.Spec.EphemeralContainers[0].SecurityContext = nil
	if err := mallory.SubResource("ephemeralcontainers").Update(ctx, debugged); err != nil {
		t.Fatalf("an ordinary ephemeral container: %v", err)
	}

	// An Exemption outside the exemptions namespace — in the pod's own
	// namespace, where its owner may write one — exempts nothing.
	own := readYAML(t, "exemption.yaml")
	own.SetNamespace(apps)
	own.SetName("own")
	_ = unstructured.SetNestedSlice(own.Object, []any{map[string]any{
		"matcher":  map[string]any{"namespace": apps, "name": "^own-.*"},
		"policies": []any{PolicyPrivileged},
	}}, "spec", "exemptions")
	if err := env.Client.Create(ctx, own); err != nil {
		t.Fatal(err)
	}

	// A new Exemption applies to the next request, without a restart.
	debug := readYAML(t, "exemption.yaml")
	debug.SetNamespace(exemptionNS)
	debug.SetName("debug")
	_ = unstructured.SetNestedSlice(debug.Object, []any{map[string]any{
		"matcher":  map[string]any{"namespace": apps, "name": "^debug-.*"},
		"policies": []any{PolicyPrivileged},
	}}, "spec", "exemptions")
	if err := env.Client.Create(ctx, debug); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		err := env.Client.Create(ctx, pod(apps, "debug-shell", true))
		return err == nil, ignoreForbidden(err)
	})
	if err != nil {
		t.Fatalf("privileged pod after its Exemption: %v", err)
	}
	// The module has seen "own" too (created before "debug"), and ignores it.
	err = env.Client.Create(ctx, pod(apps, "own-shell", true))
	if want := `add an Exemption (uds.dev/v1alpha1) in namespace "` + exemptionNS + `"`; !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
		t.Fatalf("privileged pod exempted only from its own namespace: got %v, want it denied, pointing at the exemptions namespace (%s)", err, want)
	}

	// The watcher takes the ClusterConfig in: status, then admission follows.
	w := vigiltest.StartProcess(t, envv, bin, "watcher", "--probe-addr", vigiltest.FreeAddr(t), "--metrics-addr", vigiltest.FreeAddr(t), "--leader-elect=false")
	w.WaitOutput(t, "watcher ready", 30*time.Second)
	cc := readYAML(t, "clusterconfig.yaml")
	if err := env.Client.Create(ctx, cc); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cc), cc); err != nil {
			return false, err
		}
		phase, _, _ := unstructured.NestedString(cc.Object, "status", "phase")
		gen, _, _ := unstructured.NestedInt64(cc.Object, "status", "observedGeneration")
		return phase == "Ready" && gen == cc.GetGeneration(), nil
	})
	if err != nil {
		t.Fatalf("ClusterConfig status not reconciled (%v): %v\n%s", cc.Object["status"], err, w.Output)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		p := pod(apps, "", false)
		p.GenerateName = "web-"
		if err := env.Client.Create(ctx, p); err != nil {
			return false, err
		}
		return p.Labels[ClusterLabel] == "demo-cluster", nil
	})
	if err != nil {
		t.Fatalf("admission did not follow the ClusterConfig's cluster name: %v", err)
	}
	if err := env.Client.Create(ctx, pod(apps, "own-shell", true)); !apierrors.IsForbidden(err) {
		t.Fatalf("privileged pod exempted from its own namespace, before the ClusterConfig allows all: %v, want it denied", err)
	}

	// The ClusterConfig allows Exemptions from all namespaces: "own" counts.
	if err := env.Client.Patch(ctx, cc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"policy":{"allowAllNsExemptions":true}}}`))); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		err := env.Client.Create(ctx, pod(apps, "own-shell", true))
		return err == nil, ignoreForbidden(err)
	})
	if err != nil {
		t.Fatalf("privileged pod under an Exemption in its own namespace, once the ClusterConfig allows all namespaces: %v", err)
	}
}

func ignoreForbidden(err error) error {
	if apierrors.IsForbidden(err) {
		return nil
	}
	return err
}

// lowRightsUser is a client of a user who may only create, read, update and
// patch pods and their ephemeral containers in namespace ns.
func lowRightsUser(t *testing.T, ns string) client.Client {
	t.Helper()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pods-only"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"pods", "pods/ephemeralcontainers"}, Verbs: []string{"create", "get", "update", "patch"},
	}}}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pods-only"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "mallory"}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := env.Client.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.New(env.AsUserConfig("mallory"), client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	// The authorizer takes in new RBAC within a moment.
	vigiltest.Eventually(t, 10*time.Second, func() error {
		return c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "web"}, &corev1.Pod{})
	})
	return c
}
