package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
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
	"github.com/vigilkit/vigil/provenance"
	"github.com/vigilkit/vigil/vigiltest"
)

// selfService is the tenant of the issue: a user who may create namespaces
// and, in those she creates (grant), Pods and the module's custom
// resources — and the Namespace itself, as a self-service provisioner's
// namespace-admin role gives her.
type selfService struct {
	t    *testing.T
	user string
	c    client.Client
}

func newSelfService(t *testing.T, user string) *selfService {
	t.Helper()
	ctx := t.Context()
	create := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "self-service-" + user}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"create"},
	}}}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: create.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: create.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	admin := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "namespace-admin-" + user}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "update", "patch", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create", "get", "update", "patch"}},
		{APIGroups: []string{group}, Resources: []string{"exemptions"}, Verbs: []string{"create", "get", "update", "patch"}},
	}}
	for _, o := range []client.Object{create, binding, admin} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
	c, err := client.New(env.AsUserConfig(user), client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return &selfService{t: t, user: user, c: c}
}

// createNamespace creates a namespace as the tenant and grants her admin of
// it, as the provisioner does.
func (s *selfService) createNamespace(name string) *corev1.Namespace {
	s.t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := s.c.Create(s.t.Context(), ns); err != nil {
		s.t.Fatalf("the tenant creates namespace %s: %v", name, err)
	}
	s.t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ns) })
	s.grant(name)
	return ns
}

// grant binds the tenant's namespace-admin role in ns; it returns once the
// authorizer has it.
func (s *selfService) grant(ns string) {
	s.t.Helper()
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "namespace-admin"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "namespace-admin-" + s.user},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: s.user}},
	}
	if err := env.Client.Create(s.t.Context(), rb); err != nil {
		s.t.Fatal(err)
	}
	vigiltest.Eventually(s.t, 10*time.Second, func() error {
		return s.c.Get(s.t.Context(), client.ObjectKey{Name: ns}, &corev1.Namespace{})
	})
}

func randomID() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

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
	id := randomID()
	crds, err := os.ReadFile("crds.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := env.InstallCRDYAML(crds); err != nil {
		t.Fatal(err)
	}
	ns := env.Namespace(t)
	trusted := "exemptions-" + id
	moduleEnv := []string{"VIGIL_NAMESPACE=" + ns, "CLUSTERCONFIG_TIMEOUT=1s", "CLUSTERCONFIG_EXEMPTIONS_NAMESPACE=" + trusted}
	bin := vigiltest.BuildModule(t, ".")
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
	// create where it is absent is internal/registration's
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
	m := env.InstallModule(t, vigiltest.ModuleOptions{Binary: bin, Env: moduleEnv, Manifests: manifests})
	tess := newSelfService(t, "tess-"+id)

	// Finding 6: the exemptions namespace cannot be taken.
	want := "only group:system:masters may create or delete namespace " + trusted
	vigiltest.Eventually(t, 10*time.Second, func() error { // the guard applies within a moment: dry runs until then
		if err := tess.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: trusted}}, client.DryRunAll); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
			return fmt.Errorf("dry-run create of %s as the tenant: %v, want it refused (%s)", trusted, err, want)
		}
		return nil
	})
	if err := tess.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: trusted}}); !apierrors.IsForbidden(err) {
		t.Fatalf("the tenant creates the exemptions namespace %s: %v, want it refused", trusted, err)
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: trusted}, &corev1.Namespace{}); err != nil {
		t.Fatalf("the install created the exemptions namespace %s: %v", trusted, err)
	}
	tess.grant(trusted)
	if err := patchNS(tess.c, ctx, trusted, `{"metadata":{"labels":{"app.kubernetes.io/name":null,"team":"tess"}}}`); !apierrors.IsForbidden(err) {
		t.Errorf("the tenant relabels the exemptions namespace: %v, want it refused", err)
	}
	if err := tess.c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: trusted}}); !apierrors.IsForbidden(err) {
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
	forged := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: mine, Annotations: map[string]string{
		provenance.CreatedBy: "system:admin", provenance.CreatedByGroups: "system:masters",
	}}}
	if err := tess.c.Create(ctx, forged); err != nil {
		t.Fatalf("the tenant creates %s: %v", mine, err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), forged) })
	if got := forged.Annotations[provenance.CreatedBy]; got != tess.user {
		t.Errorf("her namespace records creator %q, want %s", got, tess.user)
	}
	tess.grant(mine)
	err = tess.c.Create(ctx, pod(mine, "node-exporter-x", true))
	if wantWhy := "Exemption " + trusted + "/node-exporter does not apply: namespace " + mine + " was created at"; !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), wantWhy) {
		t.Fatalf("the tenant's privileged node-exporter-x in the %s she created after the Exemption: %v, want it denied (%s)", mine, err, wantWhy)
	}
	for what, patch := range map[string]string{
		"strip": fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, provenance.CreatedBy),
		"forge": fmt.Sprintf(`{"metadata":{"annotations":{%q:"system:admin",%q:"system:masters"}}}`, provenance.CreatedBy, provenance.CreatedByGroups),
	} {
		if err := patchNS(tess.c, ctx, mine, patch); !apierrors.IsForbidden(err) {
			t.Errorf("the tenant tries to %s the record of her namespace's creator: %v, want it refused", what, err)
		}
	}
	if err := tess.c.Create(ctx, pod(mine, "node-exporter-y", true)); !apierrors.IsForbidden(err) {
		t.Errorf("after her attempts on its record, a privileged pod in %s: %v, want it denied", mine, err)
	}

	// An Exemption written after her namespace existed applies to it: the
	// admin saw the namespace and exempted it.
	older := tess.createNamespace("metrics-" + id)
	vigiltest.Eventually(t, 3*time.Second, func() error { // creationTimestamp has whole seconds
		if !time.Now().Truncate(time.Second).After(older.CreationTimestamp.Time) {
			return fmt.Errorf("still the second %s was created in", older.Name)
		}
		return nil
	})
	if err := env.Client.Create(ctx, exemptionFor(trusted, "metrics", older.Name)); err != nil {
		t.Fatal(err)
	}
	vigiltest.Eventually(t, 10*time.Second, func() error {
		return tess.c.Create(ctx, pod(older.Name, "node-exporter-x", true))
	})
}
