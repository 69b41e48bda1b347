package registration_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/internal/definition/define"
	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/runtime/served"
	"github.com/vigilkit/vigil/internal/serving/registration"
	"github.com/vigilkit/vigil/internal/testsupport/testkit"
	"github.com/vigilkit/vigil/provenance"
	"github.com/vigilkit/vigil/vigiltest"
)

func suffix() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// tenant is a client of a user who may create namespaces and, in those she
// creates, do what a self-service provisioner grants her there — namespace
// admin, the Namespace itself included (grantIn).
func tenant(t *testing.T, user string) client.Client {
	t.Helper()
	ctx := t.Context()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "self-service-" + user}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"create"},
	}}}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	admin := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "tenant-admin-" + user}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "update", "patch", "delete"},
	}}}
	for _, o := range []client.Object{role, binding, admin} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
	c, err := client.New(env.AsUserConfig(user), client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// grantIn gives user, in namespace ns, what a provisioner gives her in the
// namespaces she creates: the Namespace's get, update, patch and delete
// among them. It returns once the authorizer has it.
func grantIn(t *testing.T, c client.Client, user, ns string) {
	t.Helper()
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-admin"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "tenant-admin-" + user},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	if err := env.Client.Create(t.Context(), rb); err != nil {
		t.Fatal(err)
	}
	vigiltest.Eventually(t, 10*time.Second, func() error {
		return c.Get(t.Context(), client.ObjectKey{Name: ns}, &corev1.Namespace{})
	})
}

// removePolicies deletes what EnsurePolicies created for m, so that no
// later test meets it.
func removePolicies(t *testing.T, m *spec.Module) {
	t.Cleanup(func() {
		ctx := context.Background()
		api := env.Clientset.AdmissionregistrationV1()
		for _, s := range registration.Stamps(m) {
			stamps := stampAPI(t)
			if b, err := stamps.GetBinding(ctx, s.Binding.Name); err == nil {
				_ = stamps.Delete(ctx, registration.StampBindings, b.Name, b.UID)
			}
			if p, err := stamps.GetPolicy(ctx, s.Policy.Name); err == nil {
				_ = stamps.Delete(ctx, registration.StampPolicies, p.Name, p.UID)
			}
		}
		for _, g := range registration.Policies(m) {
			_ = api.ValidatingAdmissionPolicyBindings().Delete(ctx, g.Binding.Name, metav1.DeleteOptions{})
			_ = api.ValidatingAdmissionPolicies().Delete(ctx, g.Policy.Name, metav1.DeleteOptions{})
		}
	})
}

func patchNamespace(c client.Client, ctx context.Context, ns, patch string) error {
	return c.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, client.RawPatch(types.MergePatchType, []byte(patch)))
}

// forbiddenBy says whether err is the API server's refusal with want in it.
func forbiddenBy(err error, want string) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), want)
}

// A trusted namespace cannot be taken: a user who may create namespaces
// cannot create it before the install does (or after an admin deleted it),
// and even with the rights a provisioner gives her in namespaces of her own,
// she can neither relabel, re-annotate nor delete it; an installer in
// group system:masters can.
func TestTrustedNamespaceIsGuarded(t *testing.T) {
	ctx := t.Context()
	id := suffix()
	trusted := "exemptions-" + id
	m := &spec.Module{Name: "trust-" + id, Namespace: "trust-" + id + "-system", TrustedNamespaces: []spec.TrustedNamespace{{Name: trusted}}}
	removePolicies(t, m)
	tess := tenant(t, "tess-"+id)

	// The guard alone, as between an admin's deletion of the namespace and
	// the next install: only dry runs until it holds.
	api := env.Clientset.AdmissionregistrationV1()
	for _, g := range registration.TrustedGuards(m) {
		if _, err := api.ValidatingAdmissionPolicies().Create(ctx, g.Policy, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := api.ValidatingAdmissionPolicyBindings().Create(ctx, g.Binding, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	want := "only group:system:masters may create or delete namespace " + trusted
	vigiltest.Eventually(t, 10*time.Second, func() error {
		err := tess.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: trusted}}, client.DryRunAll)
		if !forbiddenBy(err, want) {
			return fmt.Errorf("dry-run create of %s as the tenant: %v, want it refused (%s)", trusted, err, want)
		}
		return nil
	})
	if err := tess.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: trusted}}); !forbiddenBy(err, want) {
		t.Fatalf("the tenant created the trusted namespace %s: %v, want it refused (%s)", trusted, err, want)
	}
	// Her own namespaces are hers to create and relabel.
	own := "tess-" + id
	if err := tess.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: own}}); err != nil {
		t.Fatalf("the tenant creates a namespace of her own: %v", err)
	}
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: own}})
	})
	grantIn(t, tess, "tess-"+id, own)
	if err := patchNamespace(tess, ctx, own, `{"metadata":{"labels":{"team":"tess"}}}`); err != nil {
		t.Errorf("the tenant relabels her own namespace: %v", err)
	}

	// The install (EnsurePolicies, as --bootstrap; the manifests the same)
	// creates it, as an installer in group system:masters.
	if err := registration.EnsurePolicies(ctx, env.Clientset, servedBy(t, env), m); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: trusted}})
	})
	have := &corev1.Namespace{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: trusted}, have); err != nil || have.Labels["app.kubernetes.io/name"] != m.Name {
		t.Fatalf("the trusted namespace after the install: %v, labels %v; want it labelled as module %s's", err, have.Labels, m.Name)
	}

	// Even were RBAC to let her, she can change nothing of it.
	grantIn(t, tess, "tess-"+id, trusted)
	for what, patch := range map[string]string{
		"relabel it":               `{"metadata":{"labels":{"team":"tess"}}}`,
		"strip the module's label": `{"metadata":{"labels":{"app.kubernetes.io/name":null}}}`,
		"annotate it":              `{"metadata":{"annotations":{"owner":"tess"}}}`,
	} {
		if err := patchNamespace(tess, ctx, trusted, patch); !forbiddenBy(err, "may create or delete namespace "+trusted+", or change its labels or annotations") {
			t.Errorf("the tenant tried to %s: %v, want it refused by the guard", what, err)
		}
	}
	if err := tess.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: trusted}}); !forbiddenBy(err, want) {
		t.Errorf("the tenant deleted the trusted namespace: %v, want it refused (%s)", err, want)
	}
	if err := patchNamespace(env.Client, ctx, trusted, `{"metadata":{"labels":{"reviewed":"yes"}}}`); err != nil {
		t.Errorf("an admin (group system:masters) relabels the trusted namespace: %v", err)
	}
}

// Every Namespace records who created it, and the record cannot be forged
// or stripped: the tenant's annotations on her CREATE are overwritten with
// her own name, and she cannot change or remove them afterwards, though she
// may update her namespace; a namespace an admin creates records the admin
// and group system:masters.
func TestNamespaceProvenanceIsRecordedAndGuarded(t *testing.T) {
	ctx := t.Context()
	id := suffix()
	m := &spec.Module{Name: "prov-" + id, Namespace: "prov-" + id + "-system", Provenance: &spec.Provenance{}}
	// The stamp and its guard each apply a moment after their creation,
	// independently: wait for both.
	installProvenance(t, m)
	user := "tess-" + id
	tess := tenant(t, user)

	// She forges the stamp on her CREATE: the API server writes the truth.
	own := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "monitoring-" + id, Annotations: map[string]string{
		provenance.CreatedBy: "system:admin", provenance.CreatedByGroups: "system:masters",
	}}}
	if err := tess.Create(ctx, own); err != nil {
		t.Fatalf("the tenant creates a namespace: %v", err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), own) })
	o := provenance.Of(own, provenance.Stamp{})
	if groups, _ := provenance.DecodeGroups(own.Annotations[provenance.CreatedByGroups]); o.Creator != user || slices.Contains(groups, "system:masters") {
		t.Fatalf("the tenant's namespace records creator %q, groups %v (annotations %v); want %s and not system:masters", o.Creator, o.Groups, own.Annotations, user)
	}

	grantIn(t, tess, user, own.Name)
	for what, patch := range map[string]string{
		"strip the creator": fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, provenance.CreatedBy),
		"forge the creator": fmt.Sprintf(`{"metadata":{"annotations":{%q:"system:admin"}}}`, provenance.CreatedBy),
		"forge the groups":  fmt.Sprintf(`{"metadata":{"annotations":{%q:"system:masters"}}}`, provenance.CreatedByGroups),
		"strip both":        fmt.Sprintf(`{"metadata":{"annotations":{%q:null,%q:null}}}`, provenance.CreatedBy, provenance.CreatedByGroups),
	} {
		if err := patchNamespace(tess, ctx, own.Name, patch); !forbiddenBy(err, "may change or remove the annotations "+provenance.CreatedBy) {
			t.Errorf("the tenant tried to %s: %v, want it refused by the guard", what, err)
		}
	}
	if err := patchNamespace(tess, ctx, own.Name, `{"metadata":{"labels":{"team":"tess"},"annotations":{"note":"mine"}}}`); err != nil {
		t.Errorf("the tenant updates her namespace otherwise: %v", err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(own), own); err != nil || provenance.Of(own, provenance.Stamp{}).Creator != user {
		t.Errorf("after her attempts the namespace records %v (%v), want %s", own.Annotations, err, user)
	}

	// An admin's namespace records the admin, in group system:masters.
	admins := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "monitoring-admin-" + id}}
	if err := env.Client.Create(ctx, admins); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), admins) })
	if o := provenance.Of(admins, provenance.Stamp{}); !slices.Contains(o.Groups, "system:masters") {
		t.Errorf("an admin's namespace records %q, groups %v; want group system:masters among them", o.Creator, o.Groups)
	}
}

// The install creates the provenance guard before the stamp it guards: a
// stamp is believed provenance.Settle after its creation, and its guard,
// created first, has had longer to take effect by then.
func TestProvenanceGuardIsCreatedBeforeItsStamp(t *testing.T) {
	id := suffix()
	m := &spec.Module{Name: "order-" + id, Namespace: "order-" + id + "-system", Provenance: &spec.Provenance{}}
	removePolicies(t, m)
	cfg, creates := testkit.RecordCreates(env.Config)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := registration.EnsurePolicies(t.Context(), cs, servedBy(t, env), m); err != nil {
		t.Fatal(err)
	}
	guard, stamp := -1, -1
	for i, path := range creates() {
		switch {
		case strings.HasSuffix(path, "/validatingadmissionpolicies") && guard < 0:
			guard = i
		case strings.HasSuffix(path, "/mutatingadmissionpolicies") && stamp < 0:
			stamp = i
		}
	}
	if guard < 0 || stamp < 0 || guard > stamp {
		t.Errorf("creates %v: the first ValidatingAdmissionPolicy is create %d and the first MutatingAdmissionPolicy %d; want both, the guard first", creates(), guard, stamp)
	}
}

// installProvenance installs module m's provenance policies and returns
// once the stamp applies, with the stamp's policy as installed.
func installProvenance(t *testing.T, m *spec.Module) provenance.Stamp {
	t.Helper()
	ctx := t.Context()
	removePolicies(t, m)
	if err := registration.EnsurePolicies(ctx, env.Clientset, servedBy(t, env), m); err != nil {
		t.Fatalf("EnsurePolicies: %v", err)
	}
	vigiltest.Eventually(t, 10*time.Second, func() error {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "probe-" + m.Name, Annotations: map[string]string{provenance.CreatedBy: "forged"}}}
		if err := env.Client.Create(ctx, ns, client.DryRunAll); err != nil {
			return err
		}
		if ns.Annotations[provenance.CreatedBy] == "forged" {
			return fmt.Errorf("namespace not stamped yet: %v", ns.Annotations)
		}
		// And the guard refuses a vouch on a CREATE, even an admin's.
		vouched := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "probe-" + m.Name, Annotations: map[string]string{provenance.VouchedUnder: "x"}}}
		if err := env.Client.Create(ctx, vouched, client.DryRunAll); !forbiddenBy(err, "create the namespace without them") {
			return fmt.Errorf("the guard is not in force yet: a vouch on a CREATE: %v", err)
		}
		return nil
	})
	policy, err := stampAPI(t).GetPolicy(ctx, registration.ProvenanceStampName(m.Name))
	if err != nil {
		t.Fatal(err)
	}
	return provenance.StampOf(policy)
}

// settled waits until a namespace created now is believed under stamp.
func settled(t *testing.T, stamp provenance.Stamp) {
	t.Helper()
	vigiltest.Eventually(t, provenance.Settle+5*time.Second, func() error {
		if now := time.Now().Truncate(time.Second); !now.After(stamp.Since.Add(provenance.Settle)) {
			return fmt.Errorf("%s: a namespace created now is within %s of the stamp's policy (%s)", now, provenance.Settle, stamp.Since)
		}
		return nil
	})
}

// A group's commas (OIDC and webhook-token groups are free strings) make no
// membership: a user in group "devs,system:masters", or
// `devs","system:masters`, creates a namespace whose record, read back,
// holds that one group, and not system:masters.
func TestNamespaceProvenanceGroupsAreNotSplit(t *testing.T) {
	ctx := t.Context()
	id := suffix()
	m := &spec.Module{Name: "groups-" + id, Namespace: "groups-" + id + "-system", Provenance: &spec.Provenance{}}
	stamp := installProvenance(t, m)
	settled(t, stamp)
	user := "dana-" + id
	tenant(t, user) // may create namespaces
	for i, group := range []string{"devs,system:masters", `devs","system:masters`, `devs\",\"system:masters`} {
		c, err := env.AsUser(user, group)
		if err != nil {
			t.Fatal(err)
		}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("devs-%d-%s", i, id)}}
		if err := c.Create(ctx, ns); err != nil {
			t.Fatalf("a user in group %q creates a namespace: %v", group, err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ns) })
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ns), ns); err != nil {
			t.Fatal(err)
		}
		o, err := define.Origin(ctx, env.Client, m.Name, ns.Name)
		if err != nil {
			t.Fatal(err)
		}
		if !o.Known || o.Creator != user || !slices.Contains(o.Groups, group) || o.CreatedByAnyOf("group:system:masters") {
			t.Errorf("the namespace of a user in group %q records %q (known %v: %s), groups %q (annotation %s); want %s, in that one group, not in system:masters",
				group, o.Creator, o.Known, o.Unknown, o.Groups, ns.Annotations[provenance.CreatedByGroups], user)
		}
		if ok, why := o.Trusted("group:system:masters"); ok {
			t.Errorf("the namespace of a user in group %q is trusted as system:masters': %s", group, why)
		}
	}
}

// A stamp is believed only where the stamp's policy was in force when the
// namespace was created: a namespace the tenant created, forging an admin's
// stamp, while the module was not installed is of an unknown creator after
// the install; an admin (an allowed identity) vouches for it with the
// stamp's policy's UID, which the tenant can neither write on her
// namespaces nor on a namespace's CREATE.
func TestNamespaceProvenanceBeforeTheStampIsUnknown(t *testing.T) {
	ctx := t.Context()
	id := suffix()
	m := &spec.Module{Name: "before-" + id, Namespace: "before-" + id + "-system", Provenance: &spec.Provenance{}}
	user := "tess-" + id
	tess := tenant(t, user)
	forgedStamp := map[string]string{provenance.CreatedBy: "system:admin", provenance.CreatedByGroups: `["system:masters","system:authenticated"]`}
	forged := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "logging-" + id, Annotations: forgedStamp}}
	// No stamp is in force (an earlier test's is gone within a moment of
	// its removal): dry runs until a forged stamp stays.
	vigiltest.Eventually(t, 10*time.Second, func() error {
		probe := forged.DeepCopy()
		if err := tess.Create(ctx, probe, client.DryRunAll); err != nil {
			return err
		}
		if probe.Annotations[provenance.CreatedBy] != "system:admin" {
			return fmt.Errorf("a stamp is still in force: %v", probe.Annotations)
		}
		return nil
	})
	if err := tess.Create(ctx, forged); err != nil {
		t.Fatalf("the tenant creates a namespace before the install: %v", err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), forged) })
	if forged.Annotations[provenance.CreatedBy] != "system:admin" {
		t.Fatalf("another stamp is in force: the forged namespace records %v", forged.Annotations)
	}
	stamp := installProvenance(t, m)
	o, err := define.Origin(ctx, env.Client, m.Name, forged.Name)
	if err != nil {
		t.Fatal(err)
	}
	if ok, why := o.Trusted("group:system:masters"); ok || o.Known || !strings.Contains(why, "before the stamp of namespace creators was in force") {
		t.Fatalf("a namespace the tenant created with a forged stamp before the install: known %v, trusted %v (%s); want its creator unknown", o.Known, ok, why)
	}

	// She cannot vouch for it herself, nor create one vouched for.
	grantIn(t, tess, user, forged.Name)
	vouch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, provenance.VouchedUnder, stamp.UID)
	if err := patchNamespace(tess, ctx, forged.Name, vouch); !forbiddenBy(err, "may change or remove the annotations") {
		t.Errorf("the tenant vouches for her namespace: %v, want it refused by the guard", err)
	}
	vouched := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "vouched-" + id, Annotations: map[string]string{provenance.VouchedUnder: stamp.UID}}}
	if err := tess.Create(ctx, vouched); !forbiddenBy(err, "create the namespace without them") {
		t.Errorf("the tenant creates a namespace vouched for: %v, want it refused by the guard", err)
		_ = env.Client.Delete(ctx, vouched)
	}
	// An admin can.
	if err := patchNamespace(env.Client, ctx, forged.Name, vouch); err != nil {
		t.Fatalf("an admin vouches for the namespace: %v", err)
	}
	if o, err := define.Origin(ctx, env.Client, m.Name, forged.Name); err != nil || !o.Vouched {
		t.Errorf("the namespace an admin vouched for: %+v, %v; want it vouched for", o, err)
	}
}

// servedBy is what the test's API server serves.
func servedBy(t *testing.T, env *vigiltest.Env) served.Cluster {
	t.Helper()
	c, err := served.Discover(t.Context(), env.Clientset.Discovery())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// stampAPI is the test API server's MutatingAdmissionPolicy API.
func stampAPI(t *testing.T) *registration.StampAPI {
	t.Helper()
	c, err := served.Discover(context.Background(), env.Clientset.Discovery())
	if err != nil {
		t.Fatal(err)
	}
	api, err := registration.NewStampAPI(env.Clientset, c, "the test's stamps")
	if err != nil {
		t.Fatal(err)
	}
	return api
}
