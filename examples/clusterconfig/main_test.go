package main

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
	"sigs.k8s.io/yaml"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/store/v1alpha1"
	"github.com/vigilkit/vigil/vigiltest"
)

var env *vigiltest.Env

func TestMain(m *testing.M) {
	os.Exit(vigiltest.Run(m, vigiltest.Options{}, &env))
}

// logged waits until the process has logged want.
func readYAML(t *testing.T, file string) *unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(raw, &u.Object); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return u
}

func pod(ns, name string, privileged bool) *corev1.Pod {
	c := corev1.Container{Name: "main", Image: "busybox"}
	if privileged {
		c.SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.PodSpec{Containers: []corev1.Container{c}}}
}

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
	bin := vigiltest.BuildModule(t, ".")
	ns := env.Namespace(t)
	apps := env.Namespace(t)
	exemptionNS := env.Namespace(t) // the module's exemptions namespace
	kc := env.KubeConfigFile(t)
	handoff := filepath.Join(dir, "handoff")
	envv := []string{
		"KUBECONFIG=" + kc, "VIGIL_HANDOFF_DIR=" + handoff, "VIGIL_NAMESPACE=" + ns,
		"CLUSTERCONFIG_DEFAULTS=" + filepath.Join(".", "defaults.yaml"), "CLUSTERCONFIG_TIMEOUT=1s",
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

	// Phase 0 waits for the ClusterConfig CRD.
	p0 := vigiltest.StartProcess(t, envv, bin, gateArgs("0")...)
	p0.WaitOutput(t, "gate waiting", 10*time.Second)
	crds, err := os.ReadFile("crds.yaml")
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

// Exemptions count only from the exemptions namespace, unless the config
// allows all namespaces.
func TestExemptionsOnlyFromTheirNamespace(t *testing.T) {
	ex := func(ns, name string) *unstructured.Unstructured {
		u := readYAML(t, "exemption.yaml")
		u.SetNamespace(ns)
		u.SetName(name)
		return u
	}
	list := []*unstructured.Unstructured{ex("monitoring", "self-made"), ex("uds-policy-exemptions", "node-exporter")}
	if got, _, _ := matchExemption(names.Matcher(t.Context()), list[:1], "uds-policy-exemptions", "monitoring", "node-exporter-abc", PolicyPrivileged); got != "" {
		t.Errorf("an Exemption in the pod's own namespace matched: %s", got)
	}
	if got, _, _ := matchExemption(names.Matcher(t.Context()), list, "uds-policy-exemptions", "monitoring", "node-exporter-abc", PolicyPrivileged); got != "uds-policy-exemptions/node-exporter" {
		t.Errorf("match = %q, want the one in the exemptions namespace", got)
	}
	if got, _, _ := matchExemption(names.Matcher(t.Context()), list[:1], "", "monitoring", "node-exporter-abc", PolicyPrivileged); got != "monitoring/self-made" {
		t.Errorf("all namespaces allowed: match = %q, want monitoring/self-made", got)
	}
	s := settings{defaultsPath: "defaults.yaml"}
	spec, err := s.effective(readYAML(t, "clusterconfig.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if allowAllNsExemptions(spec) {
		t.Error("the defaults allow Exemptions from all namespaces; want only the exemptions namespace")
	}
	cc := readYAML(t, "clusterconfig.yaml")
	_ = unstructured.SetNestedField(cc.Object, true, "spec", "policy", "allowAllNsExemptions")
	if spec, err = s.effective(cc); err != nil || !allowAllNsExemptions(spec) {
		t.Errorf("a ClusterConfig with allowAllNsExemptions: true: %v, %v; want all namespaces allowed", spec, err)
	}
	t.Setenv("CLUSTERCONFIG_EXEMPTIONS_NAMESPACE", "")
	os.Unsetenv("CLUSTERCONFIG_EXEMPTIONS_NAMESPACE")
	if got := declareSettings(vigil.NewModule("uds-core", vigil.Options{})); got.exemptionsNamespace != "uds-policy-exemptions" {
		t.Errorf("exemptions namespace %q by default, want uds-policy-exemptions", got.exemptionsNamespace)
	}
}

// The defaults merge under what the ClusterConfig sets.
func TestEffectiveMergesOverDefaults(t *testing.T) {
	s := settings{defaultsPath: "defaults.yaml"}
	cc := readYAML(t, "clusterconfig.yaml")
	spec, err := s.effective(cc)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(spec)
	for _, want := range []string{`"clusterName":"demo-cluster"`, `"adminDomain":"admin.uds.dev"`, `"allowAllNsExemptions":false`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("effective spec %s lacks %s", raw, want)
		}
	}
	s.defaultsPath = filepath.Join(t.TempDir(), "missing.yaml")
	if _, err := s.defaults(true); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing defaults when required: %v, want not-exist", err)
	}
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

// The defaults Secret is mounted where the module reads it, in the
// containers that need it, and phase 1 — run from the manifests' pod spec as
// the kubelet would, the Secret's key a file under the pod's volumes — falls
// back to it when no ClusterConfig exists, and merges a ClusterConfig over
// it when one does.
func TestDefaultsSecretIsMountedAndMergedUnder(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	crds, err := os.ReadFile("crds.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := env.InstallCRDYAML(crds); err != nil {
		t.Fatal(err)
	}
	moduleEnv := []string{"VIGIL_NAMESPACE=" + ns, "CLUSTERCONFIG_TIMEOUT=1s", "CLUSTERCONFIG_EXEMPTIONS_NAMESPACE=" + env.Namespace(t)}
	m := env.InstallModule(t, vigiltest.ModuleOptions{Env: moduleEnv})

	// The manifests mount it where the module reads it.
	ds, err := m.Manifests.Deployments()
	if err != nil {
		t.Fatal(err)
	}
	mounted := map[string]bool{}
	var volumes []corev1.Volume
	for _, d := range ds {
		volumes = append(volumes, d.Spec.Template.Spec.Volumes...)
		for _, c := range append(d.Spec.Template.Spec.InitContainers, d.Spec.Template.Spec.Containers...) {
			for _, vm := range c.VolumeMounts {
				if vm.Name == "secret-uds-core-defaults" {
					mounted[c.Name] = vm.MountPath == DefaultsDir && vm.ReadOnly
				}
			}
		}
	}
	if want := map[string]bool{"gate-phase-1": true, "admission": true, "watcher": true}; !maps.Equal(mounted, want) {
		t.Errorf("containers mounting the defaults at %s read-only: %v, want %v", DefaultsDir, mounted, want)
	}
	var secretVolumes int
	for _, v := range volumes {
		if s := v.Secret; s != nil && s.SecretName == DefaultsSecret {
			secretVolumes++
			if s.Optional != nil && *s.Optional || len(s.Items) != 1 || s.Items[0].Key != DefaultsKey || s.Items[0].Path != DefaultsKey {
				t.Errorf("the defaults volume %+v: want it required, with key %s as the file %s", s, DefaultsKey, DefaultsKey)
			}
		}
	}
	if secretVolumes != 2 {
		t.Errorf("%d pod volumes of Secret %s, want one per Deployment (admission, watcher)", secretVolumes, DefaultsSecret)
	}
	// plan names it as what the pods cannot start without.
	plan, err := exec.Command(m.Binary, "plan").CombinedOutput()
	if err != nil || !strings.Contains(string(plan), DefaultsSecret) {
		t.Errorf("plan (%v) does not name the Secret %s:\n%s", err, DefaultsSecret, plan)
	}

	// The platform's Secret, with defaults of its own.
	defaults := "attributes:\n  clusterName: from-the-secret\nexpose:\n  domain: secret.example\n  adminDomain: admin.secret.example\npolicy:\n  allowAllNsExemptions: false\n"
	if err := env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: DefaultsSecret}, Data: map[string][]byte{DefaultsKey: []byte(defaults)}}); err != nil {
		t.Fatal(err)
	}
	cc := readYAML(t, "clusterconfig.yaml")
	deleteInitial := func() {
		if err := env.Client.Delete(context.Background(), cc.DeepCopy()); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	deleteInitial() // an earlier test's
	t.Cleanup(deleteInitial)

	// phase1 runs phases 0 and 1 of a new admission pod, as the kubelet
	// runs its init containers, and returns what phase 1 stored.
	admission, err := m.Manifests.Deployment("admission")
	if err != nil || admission == nil {
		t.Fatalf("the admission Deployment: %v", err)
	}
	phase1 := func() (map[string]any, string) {
		t.Helper()
		pod := env.NewPod(t, ns, admission.Spec.Template, vigiltest.PodOptions{Binary: m.Binary, Env: moduleEnv})
		pod.RunInit(30 * time.Second)
		p := pod.RunInit(30 * time.Second)
		st := &v1alpha1.Store{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "uds-core"}, st); err != nil {
			t.Fatalf("the Store phase 1 wrote: %v", err)
		}
		stored := map[string]any{}
		if err := json.Unmarshal([]byte(st.Data[keyInitialConfig]), &stored); err != nil {
			t.Fatalf("Store %s = %q: %v", keyInitialConfig, st.Data[keyInitialConfig], err)
		}
		return stored, p.Output.String()
	}
	str := func(stored map[string]any, path ...string) string {
		v, _, _ := unstructured.NestedString(stored, path...)
		return v
	}

	// No ClusterConfig: the fallback reads the Secret's file.
	stored, logs := phase1()
	if !strings.Contains(logs, "gate fallback") {
		t.Errorf("phase 1 did not finish with its fallback:\n%s", logs)
	}
	if got := str(stored, "attributes", "clusterName"); got != "from-the-secret" {
		t.Errorf("fallback clusterName %q, want the Secret's from-the-secret (stored %v)", got, stored)
	}
	if got := str(stored, "expose", "adminDomain"); got != "admin.secret.example" {
		t.Errorf("fallback adminDomain %q, want the Secret's", got)
	}

	// A ClusterConfig: merged over the Secret's defaults.
	if err := env.Client.Create(ctx, cc.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	stored, logs = phase1()
	if strings.Contains(logs, "gate fallback") {
		t.Errorf("phase 1 fell back although the ClusterConfig exists:\n%s", logs)
	}
	for path, want := range map[string]string{
		"attributes.clusterName": "demo-cluster",         // the ClusterConfig's
		"expose.domain":          "uds.dev",              // the ClusterConfig's, over the Secret's
		"expose.adminDomain":     "admin.secret.example", // the Secret's, which the ClusterConfig leaves out
	} {
		if got := str(stored, strings.Split(path, ".")...); got != want {
			t.Errorf("merged %s = %q, want %q (stored %v)", path, got, want, stored)
		}
	}
	if all, found, _ := unstructured.NestedBool(stored, "policy", "allowAllNsExemptions"); !found || all {
		t.Errorf("merged policy.allowAllNsExemptions = %v (found %v), want the Secret's false", all, found)
	}
	if tags, _, _ := unstructured.NestedStringSlice(stored, "attributes", "tags"); !slices.Equal(tags, []string{"dev"}) {
		t.Errorf("merged attributes.tags = %v, want the ClusterConfig's [dev]", tags)
	}
}
