package registration_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/serving/registration"
)

const ignore = "vigil.dev/ignore"

// registerAndWait registers opts' webhooks and waits until a Pod in apps is
// denied by the stand-in module.
func registerAndWait(t *testing.T, opts registration.Options, apps string) {
	t.Helper()
	ctx := t.Context()
	if err := registration.New(env.Clientset, opts).Register(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; ; i++ {
		p := pod(apps, fmt.Sprint("probe-", i))
		err := env.Client.Create(ctx, p)
		if err != nil && strings.Contains(err.Error(), "denied by "+opts.Module) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the module's webhook never applied: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func labelNamespace(t *testing.T, c client.Client, ns, value string) error {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, ignore, value)
	if value == "" {
		patch = fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, ignore)
	}
	return c.Patch(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, client.RawPatch(types.MergePatchType, []byte(patch)))
}

// Without an opt-out label, nothing opts a namespace out: the label that used
// to skip every webhook does nothing, and only the module's own namespace,
// kube-system and kube-node-lease are left out.
func TestNoOptOutByDefault(t *testing.T) {
	home, apps := env.Namespace(t), env.Namespace(t)
	name := "noopt-" + home[len(home)-6:]
	bootstrap(t, name)
	m := newModule(t, name)
	if err := labelNamespace(t, env.Client, apps, "true"); err != nil {
		t.Fatal(err)
	}
	registerAndWait(t, options(t, name, home, apps, m, strings.TrimSuffix(m.srv.URL(""), "/")), apps)
	labelled := pod(apps, "labelled")
	labelled.Labels = map[string]string{ignore: "true"}
	if err := env.Client.Create(t.Context(), labelled); err == nil || !strings.Contains(err.Error(), "denied by "+name) {
		t.Fatalf("a Pod labelled %s=true in a namespace labelled so: err = %v, want denied by the module", ignore, err)
	}
	cfg, _ := mutating(t, name)
	w := cfg.Webhooks[0]
	if w.ObjectSelector != nil && len(w.ObjectSelector.MatchExpressions)+len(w.ObjectSelector.MatchLabels) > 0 {
		t.Errorf("objectSelector %v: want none", w.ObjectSelector)
	}
	want := []string{"kube-node-lease", "kube-system", home}
	var got []string
	for _, e := range w.NamespaceSelector.MatchExpressions {
		if e.Key != corev1.LabelMetadataName {
			t.Errorf("namespaceSelector looks at label %s: %v", e.Key, w.NamespaceSelector)
		}
		if e.Operator == metav1.LabelSelectorOpNotIn {
			got = append(got, e.Values...)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(sortedCopy(want)) {
		t.Errorf("excluded namespaces %v, want %v", got, sortedCopy(want))
	}
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// A capability with an opt-out label skips namespaces and objects labelled
// with it, and only then.
func TestOptOutLabelSkipsLabelledNamespacesAndObjects(t *testing.T) {
	ctx := t.Context()
	home, apps, optedOut := env.Namespace(t), env.Namespace(t), env.Namespace(t)
	name := "opt-" + home[len(home)-6:]
	bootstrap(t, name)
	m := newModule(t, name)
	opts := options(t, name, home, apps, m, strings.TrimSuffix(m.srv.URL(""), "/"))
	opts.Bindings[0].Namespaces = []string{apps, optedOut}
	opts.Bindings[0].OptOut = ignore
	if err := labelNamespace(t, env.Client, optedOut, "true"); err != nil {
		t.Fatal(err)
	}
	registerAndWait(t, opts, apps)
	if err := env.Client.Create(ctx, pod(optedOut, "skipped")); err != nil {
		t.Fatalf("a Pod in a namespace labelled %s=true was sent to the webhook: %v", ignore, err)
	}
	labelled := pod(apps, "labelled")
	labelled.Labels = map[string]string{ignore: "true"}
	if err := env.Client.Create(ctx, labelled); err != nil {
		t.Fatalf("a Pod labelled %s=true was sent to the webhook: %v", ignore, err)
	}
	other := pod(apps, "other-value")
	other.Labels = map[string]string{ignore: "false"}
	if err := env.Client.Create(ctx, other); err == nil || !strings.Contains(err.Error(), "denied by "+name) {
		t.Fatalf("a Pod labelled %s=false: err = %v, want denied by the module", ignore, err)
	}
}

// grantFew gives a user the few rights of the attacker: create, get,
// update and patch on Namespaces and Pods, nothing else.
func grantFew(t *testing.T, name string, users ...string) {
	t.Helper()
	cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"namespaces", "pods"}, Verbs: []string{"create", "get", "update", "patch"},
	}}}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
	}
	for _, u := range users {
		crb.Subjects = append(crb.Subjects, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: u})
	}
	for _, o := range []client.Object{cr, crb} {
		if err := env.Client.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
}

// The guard of an opt-out label, installed on its own — no module runs, no
// webhook is registered — refuses the label, on create and update, on
// Namespaces and on objects, to everyone but the allowed users, groups and
// ServiceAccounts, and lets every other change through.
func TestGuardRefusesTheOptOutLabelWhileTheModuleIsDown(t *testing.T) {
	ctx := t.Context()
	home, apps := env.Namespace(t), env.Namespace(t)
	name := "guard-" + home[len(home)-6:]
	mallory, alice, bob := name+"-mallory", name+"-alice", name+"-bob"
	sa := "system:serviceaccount:" + home + ":deployer"
	admins := name + "-admins"
	m := &spec.Module{Name: name, Namespace: home, Capabilities: []spec.Capability{
		{Name: "policies"},
		{Name: "quotas", OptOut: &spec.OptOut{Label: ignore, Allowed: []string{alice, "group:" + admins, sa}}},
	}}
	guards := registration.Guards(m)
	if len(guards) != 1 || guards[0].Policy.Name != spec.GuardName(name, "quotas") || guards[0].Binding.Spec.PolicyName != guards[0].Policy.Name {
		t.Fatalf("guards %+v: want one, for quotas", guards)
	}
	if err := registration.EnsurePolicies(ctx, env.Clientset, servedBy(t, env), m); err != nil {
		t.Fatal(err)
	}
	// A second time updates in place.
	if err := registration.EnsurePolicies(ctx, env.Clientset, servedBy(t, env), m); err != nil {
		t.Fatalf("ensure the guards again: %v", err)
	}
	t.Cleanup(func() {
		api := env.Clientset.AdmissionregistrationV1()
		_ = api.ValidatingAdmissionPolicyBindings().Delete(context.Background(), guards[0].Binding.Name, metav1.DeleteOptions{})
		_ = api.ValidatingAdmissionPolicies().Delete(context.Background(), guards[0].Policy.Name, metav1.DeleteOptions{})
	})
	grantFew(t, name+"-few", mallory, alice, bob, sa, admins)
	as := func(user string, groups ...string) client.Client {
		c, err := client.New(env.AsUserConfig(user, groups...), client.Options{Scheme: env.Scheme})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	mc, ac, bc := as(mallory), as(alice), as(bob, admins, "system:authenticated")
	sc, err := client.New(env.AsServiceAccountConfig(home, "deployer"), client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	refused := func(what string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "may set, change or remove the label "+ignore) {
			t.Errorf("%s: err = %v, want refused by the guard", what, err)
		}
	}
	ok := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}
	nsWith := func(n int, value string) *corev1.Namespace {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", name, n)}}
		if value != "" {
			ns.Labels = map[string]string{ignore: value}
		}
		return ns
	}

	// The policy takes effect once the API server's policy informer has it
	// and RBAC has reached the authorizer: wait for the first refusal.
	deadline := time.Now().Add(20 * time.Second)
	for n := 100; ; n++ {
		err := mc.Create(ctx, nsWith(n, "true"))
		if apierrors.IsForbidden(err) && strings.Contains(err.Error(), "may set") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the guard never refused a namespace created with %s=true: %v", ignore, err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	refused("mallory creates a namespace labelled true", mc.Create(ctx, nsWith(1, "true")))
	refused("mallory creates a namespace labelled false", mc.Create(ctx, nsWith(1, "false")))
	ok("mallory creates a plain namespace", mc.Create(ctx, nsWith(2, "")))
	refused("mallory labels her namespace", labelNamespace(t, mc, nsWith(2, "").Name, "true"))
	ok("mallory changes another label of her namespace", mc.Patch(ctx, nsWith(2, ""), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"red"}}}`))))

	labelledPod := pod(apps, "labelled")
	labelledPod.Labels = map[string]string{ignore: "true"}
	refused("mallory creates a labelled pod", mc.Create(ctx, labelledPod.DeepCopy()))
	ok("mallory creates a plain pod", mc.Create(ctx, pod(apps, "plain")))
	refused("mallory labels her pod", mc.Patch(ctx, pod(apps, "plain"), client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:"true"}}}`, ignore)))))
	refused("mallory labels her pod through an update", func() error {
		p := &corev1.Pod{}
		if err := mc.Get(ctx, client.ObjectKey{Namespace: apps, Name: "plain"}, p); err != nil {
			return err
		}
		p.Labels = map[string]string{ignore: "true"}
		return mc.Update(ctx, p)
	}())

	// The allowed: a user, a group's member, a ServiceAccount.
	ok("alice creates a labelled namespace", ac.Create(ctx, nsWith(3, "true")))
	ok("bob of the admins labels mallory's namespace", labelNamespace(t, bc, nsWith(2, "").Name, "true"))
	ok("the ServiceAccount creates a labelled pod", sc.Create(ctx, labelledPod.DeepCopy()))
	ok("alice labels mallory's pod", ac.Patch(ctx, pod(apps, "plain"), client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:"true"}}}`, ignore)))))

	// Mallory can neither change nor remove what they set, but may change
	// everything else.
	refused("mallory changes the label", labelNamespace(t, mc, nsWith(3, "").Name, "false"))
	refused("mallory removes the label", labelNamespace(t, mc, nsWith(3, "").Name, ""))
	ok("mallory changes another label of a labelled namespace", mc.Patch(ctx, nsWith(3, ""), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"blue"}}}`))))

	// A member of no allowed group, whatever its name resembles, is refused.
	refused("a user named like the group", as(admins).Create(ctx, nsWith(4, "true")))
}
