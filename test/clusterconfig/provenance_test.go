package clusterconfig

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/internal/testsupport/testkit"
	"github.com/vigilkit/vigil/provenance"
	"github.com/vigilkit/vigil/vigiltest"
)

func exemptionFor(ns, name string, namespaces ...string) *unstructured.Unstructured {
	u := vigil.Kind(group, version, "Exemption")
	u.SetNamespace(ns)
	u.SetName(name)
	var entries []any
	for _, n := range namespaces {
		entries = append(entries, map[string]any{
			"matcher":  map[string]any{"namespace": n, "name": "^node-exporter-.*"},
			"policies": []any{PolicyPrivileged},
		})
	}
	_ = unstructured.SetNestedSlice(u.Object, entries, "spec", "exemptions")
	return u
}

func patchNS(c client.Client, ctx context.Context, ns, patch string) error {
	return c.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, client.RawPatch(types.MergePatchType, []byte(patch)))
}

// The exemptions namespace is the install's and an Exemption is not
// claimable by whoever creates its namespace first, tried as the issue's
// tenant against the module as shipped:
//
//   - she cannot create the exemptions namespace where it does not exist
//     (before the install, or once an admin's deletion finished), and where
//     it exists she can neither relabel nor delete it, even with RBAC that
//     lets her;
//   - an Exemption for namespace monitoring-…, written before the namespace
//     exists, does not admit her privileged node-exporter-x in the
//     monitoring-… she then creates, but does in one an admin (group
//     system:masters) created; one written after her namespace existed
//     applies to it;
//   - she cannot forge or strip the record of who created her namespace.
func TestExemptionsNamespaceAndProvenanceAsShipped(t *testing.T) {
	ctx := t.Context()
	id := testkit.RandomID()
	crds, err := os.ReadFile(moduleFile("crds.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := env.InstallCRDYAML(crds); err != nil {
		t.Fatal(err)
	}
	ns := env.Namespace(t)
	trusted := "exemptions-" + id
	moduleEnv := []string{"VIGIL_NAMESPACE=" + ns, "CLUSTERCONFIG_TIMEOUT=1s", "CLUSTERCONFIG_EXEMPTIONS_NAMESPACE=" + trusted}
	bin := vigiltest.BuildModule(t, moduleDir)
	cmd := exec.Command(bin, "manifests", "--image", "vigiltest.invalid/uds-core:test")
	cmd.Env = append(os.Environ(), moduleEnv...)
	rendered, err := cmd.Output()
	if err != nil {
		t.Fatalf("manifests: %v", err)
	}
	manifests, err := vigiltest.DecodeManifests(rendered)
	if err != nil {
		t.Fatal(err)
	}
	// The manifests ship the exemptions namespace, labelled as the module's
	// (the Role of the Exemption lister, scoped to it, lives there). The
	// guard refuses a create of it by name before the API server finds it
	// exists, so the tenant's create is refused by the guard either way; a
	// create where it is absent is internal/serving/registration's
	// TestTrustedNamespaceIsGuarded.
	var shipped *unstructured.Unstructured
	for _, o := range manifests.Objects {
		if o.GetKind() == "Namespace" && o.GetName() == trusted {
			shipped = o
		}
	}
	if shipped == nil || shipped.GetLabels()["app.kubernetes.io/name"] != "uds-core" {
		t.Fatalf("the manifests ship the exemptions namespace %s as %v; want it, labelled app.kubernetes.io/name=uds-core", trusted, shipped)
	}
	// Before the install — or between an uninstall and a reinstall: an
	// earlier test's stamp is removed as an uninstall removes it — she
	// creates a namespace forging an admin's stamp, and an admin creates
	// one.
	tess := testkit.NewSelfService(t, env, "tess-"+id, group, "exemptions")
	uninstallStamp(t)
	forged, legacy := "forged-"+id, "legacy-"+id
	forgedNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: forged, Annotations: map[string]string{
		provenance.CreatedBy: "system:admin", provenance.CreatedByGroups: `["system:masters","system:authenticated"]`,
	}}}
	if err := tess.Client.Create(ctx, forgedNS); err != nil {
		t.Fatalf("the tenant creates %s before the install: %v", forged, err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), forgedNS) })
	if got := forgedNS.Annotations[provenance.CreatedBy]; got != "system:admin" {
		t.Fatalf("before the install, her namespace records creator %q: a stamp is in force", got)
	}
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: legacy}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: legacy}})
	})

	m := env.InstallModule(t, vigiltest.ModuleOptions{Binary: bin, Env: moduleEnv, Manifests: manifests})

	// Finding 6: the exemptions namespace cannot be taken.
	want := "only group:system:masters may create or delete namespace " + trusted
	vigiltest.Eventually(t, 10*time.Second, func() error { // the guard applies within a moment: dry runs until then
		if err := tess.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: trusted}}, client.DryRunAll); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
			return fmt.Errorf("dry-run create of %s as the tenant: %v, want it refused (%s)", trusted, err, want)
		}
		return nil
	})
	if err := tess.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: trusted}}); !apierrors.IsForbidden(err) {
		t.Fatalf("the tenant creates the exemptions namespace %s: %v, want it refused", trusted, err)
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: trusted}, &corev1.Namespace{}); err != nil {
		t.Fatalf("the install created the exemptions namespace %s: %v", trusted, err)
	}
	tess.Grant(trusted)
	if err := patchNS(tess.Client, ctx, trusted, `{"metadata":{"labels":{"app.kubernetes.io/name":null,"team":"tess"}}}`); !apierrors.IsForbidden(err) {
		t.Errorf("the tenant relabels the exemptions namespace: %v, want it refused", err)
	}
	if err := tess.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: trusted}}); !apierrors.IsForbidden(err) {
		t.Errorf("the tenant deletes the exemptions namespace: %v, want it refused", err)
	}

	// The module runs, as shipped.
	if err := env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: DefaultsSecret},
		Data: map[string][]byte{DefaultsKey: []byte("attributes:\n  clusterName: provenance\n")}}); err != nil {
		t.Fatal(err)
	}
	m.RunGates(60 * time.Second)
	m.StartAdmission(60 * time.Second)

	// Finding 7: the Exemption is written before either namespace exists.
	mine, admins := "monitoring-"+id, "monitoring-admin-"+id
	claims := exemptionFor(trusted, "node-exporter", mine, admins)
	if err := env.Client.Create(ctx, claims); err != nil {
		t.Fatal(err)
	}
	stampSettled(t)
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: admins}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: admins}})
	})
	// The admin's namespace claims it, once the module's cache has the Exemption.
	vigiltest.Eventually(t, 10*time.Second, func() error {
		return env.Client.Create(ctx, pod(admins, "node-exporter-x", true))
	})

	// Hers does not: she forges the record on the way, to no avail.
	minesNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: mine, Annotations: map[string]string{
		provenance.CreatedBy: "system:admin", provenance.CreatedByGroups: `["system:masters"]`,
	}}}
	if err := tess.Client.Create(ctx, minesNS); err != nil {
		t.Fatalf("the tenant creates %s: %v", mine, err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), minesNS) })
	if got := minesNS.Annotations[provenance.CreatedBy]; got != tess.User {
		t.Errorf("her namespace records creator %q, want %s", got, tess.User)
	}
	tess.Grant(mine)
	err = tess.Client.Create(ctx, pod(mine, "node-exporter-x", true))
	if wantWhy := "Exemption " + trusted + "/node-exporter does not apply: namespace " + mine + " was created by " + tess.User; !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), wantWhy) {
		t.Fatalf("the tenant's privileged node-exporter-x in the %s she created after the Exemption: %v, want it denied (%s)", mine, err, wantWhy)
	}
	for what, patch := range map[string]string{
		"strip": fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, provenance.CreatedBy),
		"forge": fmt.Sprintf(`{"metadata":{"annotations":{%q:"system:admin",%q:"[\"system:masters\"]"}}}`, provenance.CreatedBy, provenance.CreatedByGroups),
		"vouch": fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, provenance.VouchedUnder, stampUID(t)),
	} {
		if err := patchNS(tess.Client, ctx, mine, patch); !apierrors.IsForbidden(err) {
			t.Errorf("the tenant tries to %s the record of her namespace's creator: %v, want it refused", what, err)
		}
	}
	if err := tess.Client.Create(ctx, pod(mine, "node-exporter-y", true)); !apierrors.IsForbidden(err) {
		t.Errorf("after her attempts on its record, a privileged pod in %s: %v, want it denied", mine, err)
	}

	// deniedNaming waits until the module has the Exemption named and her
	// privileged pod in ns is denied, the denial saying why the Exemption
	// does not apply; an admitted pod fails the test at once (the later
	// steps still run).
	deniedNaming := func(c client.Client, ns, exemption, why string) {
		t.Helper()
		n := 0
		vigiltest.Eventually(t, 10*time.Second, func() error {
			n++
			err := c.Create(ctx, pod(ns, fmt.Sprintf("node-exporter-%s-%d", exemption, n), true))
			if err == nil {
				t.Errorf("a privileged pod in %s was admitted: Exemption %s/%s applied; want %s", ns, trusted, exemption, why)
				return nil
			}
			if want := "Exemption " + trusted + "/" + exemption + " does not apply: "; !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), why) {
				return fmt.Errorf("the privileged pod in %s: %v; want it denied, saying %q and %q", ns, err, want, why)
			}
			return nil
		})
	}

	// An Exemption written after her namespace existed does not
	// apply to it either: age is no evidence.
	older := tess.CreateNamespace("metrics-" + id)
	vigiltest.Eventually(t, 3*time.Second, func() error { // creationTimestamp has whole seconds: write the Exemption in a later one
		if !time.Now().Truncate(time.Second).After(older.CreationTimestamp.Time) {
			return fmt.Errorf("still the second %s was created in", older.Name)
		}
		return nil
	})
	if err := env.Client.Create(ctx, exemptionFor(trusted, "metrics", older.Name)); err != nil {
		t.Fatal(err)
	}
	deniedNaming(tess.Client, older.Name, "metrics", "was created by "+tess.User)

	// Nor does one she squatted the namespace of, re-applied with kubectl
	// replace --force (deleted, then created: younger than her namespace),
	// as Argo CD's Replace=true or a Helm reinstall does.
	replaced := exemptionFor(trusted, "squat", "squat-"+id)
	original := replaced.DeepCopy()
	if err := env.Client.Create(ctx, original); err != nil {
		t.Fatal(err)
	}
	squat := tess.CreateNamespace("squat-" + id)
	deniedNaming(tess.Client, squat.Name, "squat", "was created by "+tess.User)
	vigiltest.Eventually(t, 3*time.Second, func() error { // creationTimestamp has whole seconds: re-apply it in a later one
		if !time.Now().Truncate(time.Second).After(squat.CreationTimestamp.Time) {
			return fmt.Errorf("still the second %s was created in", squat.Name)
		}
		return nil
	})
	kubectl := exec.Command(filepath.Join(env.BinDir, "kubectl"), "--kubeconfig", env.KubeConfigFile(t), "replace", "--force", "-f", "-")
	body, err := json.Marshal(replaced.Object)
	if err != nil {
		t.Fatal(err)
	}
	kubectl.Stdin = bytes.NewReader(body)
	if out, err := kubectl.CombinedOutput(); err != nil {
		t.Fatalf("kubectl replace --force of the Exemption: %v\n%s", err, out)
	}
	reapplied := vigil.Kind(group, version, "Exemption")
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: trusted, Name: "squat"}, reapplied); err != nil || reapplied.GetUID() == original.GetUID() ||
		!reapplied.GetCreationTimestamp().Time.After(squat.CreationTimestamp.Time) {
		t.Fatalf("the Exemption re-applied: %v, UID %s (was %s), created %s; want it created again, in a second after namespace %s's (%s)",
			err, reapplied.GetUID(), original.GetUID(), reapplied.GetCreationTimestamp(), squat.Name, squat.CreationTimestamp)
	}
	// Once the module has an Exemption written after the replacement, it
	// has the replacement too (a watch delivers in order).
	marker := "marker-" + id
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: marker}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: marker}})
	})
	if err := env.Client.Create(ctx, exemptionFor(trusted, "marker", marker)); err != nil {
		t.Fatal(err)
	}
	vigiltest.Eventually(t, 10*time.Second, func() error {
		return env.Client.Create(ctx, pod(marker, "node-exporter-marker", true))
	})
	err = tess.Client.Create(ctx, pod(squat.Name, "node-exporter-replaced", true))
	if want := "Exemption " + trusted + "/squat does not apply: namespace " + squat.Name + " was created by " + tess.User; !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
		t.Errorf("the tenant's privileged pod in %s, after the Exemption naming it was replaced: %v; want it denied (%s)", squat.Name, err, want)
	}

	// A stamp forged while no stamp was installed is not believed.
	tess.Grant(forged)
	if err := env.Client.Create(ctx, exemptionFor(trusted, "forged", forged)); err != nil {
		t.Fatal(err)
	}
	deniedNaming(tess.Client, forged, "forged", "before the stamp of namespace creators was in force")

	// An admin's namespace from before the install is unknown too, until an
	// admin vouches for it.
	if err := env.Client.Create(ctx, exemptionFor(trusted, "legacy", legacy)); err != nil {
		t.Fatal(err)
	}
	deniedNaming(env.Client, legacy, "legacy", "before the stamp of namespace creators was in force")
	vouch(t, legacy)
	vigiltest.Eventually(t, 10*time.Second, func() error {
		return env.Client.Create(ctx, pod(legacy, "node-exporter-vouched", true))
	})
}

// stampPolicy is the module's MutatingAdmissionPolicy that stamps namespace
// creators, and its binding; stampGuard the ValidatingAdmissionPolicy that
// guards the stamp, and its binding.
const (
	stampPolicy = "uds-core-namespace-created-by"
	stampGuard  = "uds-core-namespace-created-by-guard"
)

// stampMeta is the metadata of the installed stamp of namespace creators,
// read in the version of MutatingAdmissionPolicy the API server serves (v1
// from Kubernetes 1.36; v1beta1 or v1alpha1 where enabled before): an
// error that apierrors.IsNotFound tells when it is not installed.
func stampMeta(ctx context.Context) (*metav1.PartialObjectMetadata, error) {
	mapping, err := env.Client.RESTMapper().RESTMapping(schema.GroupKind{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicy"})
	if err != nil {
		return nil, err
	}
	policy := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: stampPolicy}}
	policy.SetGroupVersionKind(mapping.GroupVersionKind)
	return policy, env.Client.Get(ctx, client.ObjectKeyFromObject(policy), policy)
}

// uninstallStamp removes the stamp of namespace creators and its guard, as
// an uninstall does, and returns once a namespace created is not stamped.
func uninstallStamp(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	api := env.Clientset.AdmissionregistrationV1()
	policy, err := stampMeta(ctx)
	if err != nil && !apierrors.IsNotFound(err) { // not installed: no earlier test installed it
		t.Fatal(err)
	}
	binding := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: stampPolicy}}
	binding.SetGroupVersionKind(policy.GroupVersionKind().GroupVersion().WithKind("MutatingAdmissionPolicyBinding"))
	for _, err := range []error{
		env.Client.Delete(ctx, binding),
		env.Client.Delete(ctx, policy),
		api.ValidatingAdmissionPolicyBindings().Delete(ctx, stampGuard, metav1.DeleteOptions{}),
		api.ValidatingAdmissionPolicies().Delete(ctx, stampGuard, metav1.DeleteOptions{}),
	} {
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	vigiltest.Eventually(t, 10*time.Second, func() error {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "probe-" + testkit.RandomID(), Annotations: map[string]string{provenance.CreatedBy: "probe"}}}
		if err := env.Client.Create(ctx, ns, client.DryRunAll); err != nil {
			return err
		}
		if got := ns.Annotations[provenance.CreatedBy]; got != "probe" {
			return fmt.Errorf("a namespace is still stamped: %s", got)
		}
		return nil
	})
}

// stampUID is the UID of the installed stamp of namespace creators.
func stampUID(t *testing.T) string {
	t.Helper()
	policy, err := stampMeta(t.Context())
	if err != nil {
		t.Fatalf("the stamp of namespace creators: %v", err)
	}
	return string(policy.UID)
}

// vouch marks the namespace, as an admin (group system:masters), as
// vouched for under the installed stamp of namespace creators
// (provenance.VouchedUnder): what an admin does for a namespace from
// before the install.
func vouch(t *testing.T, ns string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, provenance.VouchedUnder, stampUID(t))
	if err := patchNS(env.Client, t.Context(), ns, patch); err != nil {
		t.Fatalf("vouch for namespace %s: %v", ns, err)
	}
}

// stampSettled waits until a namespace created now is believed under the
// installed stamp of namespace creators (provenance.Settle).
func stampSettled(t *testing.T) {
	t.Helper()
	policy, err := stampMeta(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	testkit.AwaitSettled(t, policy.CreationTimestamp)
}
