package shipping

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/runtime/rolebind"
	"github.com/vigilkit/vigil/internal/serving/registration"
	"github.com/vigilkit/vigil/internal/testsupport/testkit"
	"github.com/vigilkit/vigil/store"
	"github.com/vigilkit/vigil/vigiltest"
)

const leastName = "least"

// leastModule uses every part of vigil that needs a permission: a gate on
// a named object whose callback writes the Store, a sample gate, a mutation
// and a validation registered when ready, a Lister, a Reconcile that patches
// through ClientFrom (declared with RBAC), a Finalize, a schedule that
// writes the Store, and a capability that fails open after an outage.
func leastModule(ns, apps string) *vigil.Module {
	m := vigil.NewModule(leastName, vigil.Options{Namespace: ns, Version: "1.0.0"})
	vigil.WaitFor(m, &corev1.ConfigMap{}).InNamespace(apps).WithName("settings").
		ToBeCreated(func(ctx context.Context, cm *corev1.ConfigMap, s vigil.Store) error {
			return s.SetAndWait(ctx, "team", cm.Data["team"])
		})
	vigil.Sample(m, func(context.Context) (int, error) { return 1, nil }, vigil.Every(time.Second)).InPhase(1).
		ToMatch(func(n int) bool { return n == 1 })
	exemptions := vigil.NewLister(m, &corev1.Secret{})
	policy := m.Capability("policy", vigil.InNamespaces(apps))
	vigil.When(policy, &corev1.ConfigMap{}).IsCreated().Named("label").
		Mutate(func(ctx context.Context, r *vigil.Request[*corev1.ConfigMap]) error {
			r.SetLabel("checked", "yes")
			if team, ok, err := vigil.StoreFrom(ctx).Module().Get("team"); err == nil && ok { // written by the gate
				r.SetLabel("team", team)
			}
			return nil
		})
	vigil.When(policy, &corev1.ConfigMap{}).IsCreated().Named("no-bad").WithLabel("bad").
		Validate(func(ctx context.Context, r *vigil.Request[*corev1.ConfigMap]) vigil.Verdict {
			if _, err := exemptions.Get(ctx, r.Namespace, "exempt-"+r.Name); err == nil {
				return admission.Allow()
			}
			return admission.Deny("bad ConfigMap " + r.Name + " has no exemption")
		})
	vigil.Watch(policy, &corev1.ConfigMap{}).WithLabel("sync").Named("sync").
		Reconcile(func(ctx context.Context, cm *corev1.ConfigMap) error {
			if cm.Annotations["reconciled"] == "yes" {
				return nil
			}
			return vigil.ClientFrom(ctx).Patch(ctx, cm, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"reconciled":"yes"}}}`)))
		})
	m.RBAC("the sync reconcile annotates ConfigMaps", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"patch"}}, apps)
	vigil.Watch(policy, &corev1.ConfigMap{}).WithLabel("guarded").Named("guard").
		Finalize(func(ctx context.Context, cm *corev1.ConfigMap) error { return nil })
	lenient := m.Capability("lenient", vigil.InNamespaces(apps), vigil.FailOpenAfter(2*time.Second))
	vigil.When(lenient, &corev1.Service{}).IsCreated().Named("tag").
		Mutate(func(ctx context.Context, r *vigil.Request[*corev1.Service]) error {
			r.SetLabel("tagged", "yes")
			return nil
		})
	m.OnSchedule("tick", vigil.Every(300*time.Millisecond), func(ctx context.Context) error {
		return vigil.StoreFrom(ctx).Set(ctx, "tick", time.Now().UTC().Format(time.RFC3339Nano))
	})
	return m
}

// forbiddenLines are the lines of a role's output that report a Forbidden.
func forbiddenLines(out string) []string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.Contains(strings.ToLower(sc.Text()), "forbidden") {
			lines = append(lines, sc.Text())
		}
	}
	return lines
}

// The module's whole life — gate phases in order, admission registering
// itself and admitting, the watcher reconciling, finalizing and scheduling
// under leader election, the Store — runs as the ServiceAccount its manifests
// create, with the RBAC they derive, and meets no Forbidden. Dropping a
// sample of the derived rules makes the role that needs it fail with a
// Forbidden that names it.
func TestManifestsRBACIsLeastPrivilege(t *testing.T) {
	ns, apps := env.Namespace(t), env.Namespace(t)
	admin := newClient(t)
	objs := testkit.RenderManifests(t, leastModule(ns, apps))
	for _, o := range objs {
		if o.GetKind() == "ValidatingWebhookConfiguration" || o.GetKind() == "MutatingWebhookConfiguration" {
			// Cluster-scoped, named after the module: removed after the test.
			t.Cleanup(func() { _ = admin.Delete(context.Background(), o.DeepCopy()) })
		}
	}
	applyObjects(t, objs, false)

	// The admission pod (gates and admission) and the watcher have a
	// ServiceAccount each.
	kc := vigiltest.WriteKubeConfig(t, env.AsServiceAccountConfig(ns, leastName))
	watcherKC := vigiltest.WriteKubeConfig(t, env.AsServiceAccountConfig(ns, leastName+"-watcher"))
	handoff := t.TempDir()
	childEnv := map[string]string{"VIGIL_TEST_NAMESPACE": ns, "VIGIL_TEST_APPS": apps, "VIGIL_TEST_KUBECONFIG": kc}
	var outputs []*vigiltest.Process

	// Each ServiceAccount holds only its own pod's rules.
	for _, tc := range []struct {
		sa    string
		attrs authorizationv1.ResourceAttributes
		want  bool
	}{
		{leastName, authorizationv1.ResourceAttributes{Verb: "patch", Group: "admissionregistration.k8s.io", Resource: "validatingwebhookconfigurations", Name: leastName}, true},
		// The lenient capability fails open after an outage: the watcher may
		// get and patch the module's two configurations (without such a
		// capability it may not: internal/shipping/manifests
		// TestWatcherFailsOpenOnlyWithTheOptIn), and nothing else.
		{leastName + "-watcher", authorizationv1.ResourceAttributes{Verb: "patch", Group: "admissionregistration.k8s.io", Resource: "validatingwebhookconfigurations", Name: leastName}, true},
		{leastName + "-watcher", authorizationv1.ResourceAttributes{Verb: "update", Group: "admissionregistration.k8s.io", Resource: "mutatingwebhookconfigurations", Name: leastName}, false},
		{leastName + "-watcher", authorizationv1.ResourceAttributes{Verb: "patch", Group: "admissionregistration.k8s.io", Resource: "validatingwebhookconfigurations", Name: "someone-else"}, false},
		{leastName + "-watcher", authorizationv1.ResourceAttributes{Verb: "create", Group: "admissionregistration.k8s.io", Resource: "validatingwebhookconfigurations"}, false},
		{leastName + "-watcher", authorizationv1.ResourceAttributes{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: ns, Name: leastName + "-watcher"}, true},
		{leastName, authorizationv1.ResourceAttributes{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: ns, Name: leastName + "-watcher"}, false},
		{leastName, authorizationv1.ResourceAttributes{Verb: "patch", Group: "admissionregistration.k8s.io", Resource: "validatingwebhookconfigurations", Name: "someone-else"}, false},
	} {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: "system:serviceaccount:" + ns + ":" + tc.sa, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
			ResourceAttributes: &tc.attrs,
		}}
		if err := admin.Create(t.Context(), sar); err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed != tc.want {
			t.Errorf("ServiceAccount %s may %s %s %s: %v, want %v", tc.sa, tc.attrs.Verb, tc.attrs.Resource, tc.attrs.Name, sar.Status.Allowed, tc.want)
		}
	}

	// Gates, phase by phase.
	if err := admin.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: "settings"}, Data: map[string]string{"team": "shop"}}); err != nil {
		t.Fatal(err)
	}
	for phase := range 2 {
		g := testkit.StartChild(t, "least", childEnv, "gate", "--phase", fmt.Sprint(phase), "--kubeconfig", kc, "--handoff-dir", handoff)
		if code := g.Wait(t, 60*time.Second); code != 0 {
			t.Fatalf("gate phase %d as the ServiceAccount exited %d:\n%s", phase, code, g.Output)
		}
		outputs = append(outputs, g)
	}

	// Admission: registers itself, then admits.
	addr := vigiltest.FreeAddr(t)
	adm := testkit.StartChild(t, "least", childEnv, "admission", "--kubeconfig", kc, "--addr", addr, "--metrics-addr", "127.0.0.1:0", "--cert-secret", leastName+"-tls",
		"--cert-hosts", "127.0.0.1", "--webhook-url", "https://"+addr, "--handoff-dir", handoff, "--shutdown-delay", "0s")
	outputs = append(outputs, adm)
	testkit.Eventually(t, 60*time.Second, "the webhooks registered with their failure policy", func() bool {
		val := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := admin.Get(context.Background(), client.ObjectKey{Name: leastName}, val); err != nil {
			return false
		}
		for _, w := range val.Webhooks {
			if strings.HasPrefix(w.Name, "policy.") && w.FailurePolicy != nil && *w.FailurePolicy == admissionregistrationv1.Fail {
				return true
			}
		}
		return false
	})
	ok := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: "ok"}}
	if err := admin.Create(t.Context(), ok); err != nil {
		t.Fatal(err)
	}
	if ok.Labels["checked"] != "yes" || ok.Labels["team"] != "shop" {
		t.Fatalf("the ConfigMap was not mutated with the team the gate stored: labels %v", ok.Labels)
	}
	bad := func() error {
		return admin.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: "bad", Labels: map[string]string{"bad": "yes"}}})
	}
	if err := bad(); err == nil || !strings.Contains(err.Error(), "bad ConfigMap bad has no exemption") {
		t.Fatalf("the validation did not deny: %v", err)
	}
	if err := admin.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: "exempt-bad"}}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the exemption, read through the Lister, admits", func() bool { return bad() == nil })

	// The watcher, with leader election.
	probe := vigiltest.FreeAddr(t)
	w := testkit.StartChild(t, "least", childEnv, "watcher", "--kubeconfig", watcherKC, "--probe-addr", probe, "--metrics-addr=",
		"--lease-duration", "2s", "--renew-deadline", "1500ms", "--retry-period", "200ms")
	outputs = append(outputs, w)
	testkit.WaitReady(t, "http://"+probe+"/readyz", w.Exited())
	for name, label := range map[string]string{"synced": "sync", "guarded": "guarded"} {
		if err := admin.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: name, Labels: map[string]string{label: "yes"}}}); err != nil {
			t.Fatal(err)
		}
	}
	get := func(name string) *corev1.ConfigMap {
		cm := &corev1.ConfigMap{}
		if err := admin.Get(context.Background(), client.ObjectKey{Namespace: apps, Name: name}, cm); err != nil {
			return nil
		}
		return cm
	}
	testkit.Eventually(t, 20*time.Second, "the reconcile annotated the ConfigMap", func() bool {
		cm := get("synced")
		return cm != nil && cm.Annotations["reconciled"] == "yes"
	})
	testkit.Eventually(t, 20*time.Second, "the finalizer added", func() bool {
		cm := get("guarded")
		return cm != nil && len(cm.Finalizers) == 1
	})
	if err := admin.Delete(t.Context(), get("guarded")); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, "the finalized ConfigMap gone", func() bool {
		return apierrors.IsNotFound(admin.Get(context.Background(), client.ObjectKey{Namespace: apps, Name: "guarded"}, &corev1.ConfigMap{}))
	})
	st, err := store.New(env.Config, store.Options{Namespace: ns, Name: leastName})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, "the gate's and the schedule's Store writes", func() bool {
		team, _, err := st.Get("team")
		if err != nil {
			t.Fatalf("Get(team): %v", err)
		}
		_, ticked, err := st.Get("tick")
		if err != nil {
			t.Fatalf("Get(tick): %v", err)
		}
		return team == "shop" && ticked
	})
	// Every admission replica goes: after the bound, the watcher fails the
	// lenient capability open with its derived rights, and only it.
	adm.Stop(t, 30*time.Second)
	testkit.Eventually(t, 20*time.Second, "the watcher failed the lenient capability open", func() bool {
		mut := &admissionregistrationv1.MutatingWebhookConfiguration{}
		if err := admin.Get(context.Background(), client.ObjectKey{Name: leastName}, mut); err != nil {
			return false
		}
		open := false
		for _, w := range mut.Webhooks {
			fp := ptr.Deref(w.FailurePolicy, admissionregistrationv1.Fail)
			if strings.HasPrefix(w.Name, "policy.") && fp != admissionregistrationv1.Fail {
				t.Fatalf("the watcher failed %s open, whose capability declared no bound", w.Name)
			}
			open = open || (strings.HasPrefix(w.Name, "lenient.") && fp == admissionregistrationv1.Ignore)
		}
		return open && strings.Contains(mut.Annotations[registration.Annotation], registration.StateFailedOpen)
	})
	w.Stop(t, 30*time.Second)
	for _, p := range outputs {
		if lines := forbiddenLines(p.Output.String()); len(lines) > 0 {
			t.Errorf("%s met Forbidden with the derived RBAC:\n%s", p, strings.Join(lines, "\n"))
		}
	}

	// Drop a sample of the derived rules: each role that needs one fails
	// with a Forbidden naming it.
	for _, tc := range []struct {
		name     string
		drop     func(rbacv1.PolicyRule) bool
		role     []string
		want     []string
		waitExit bool
	}{
		{
			name: "the gate's read of its ConfigMap",
			drop: func(r rbacv1.PolicyRule) bool {
				return r.Resources[0] == "configmaps" && slicesContain(r.Verbs, "list")
			},
			role: []string{"gate", "--phase", "0", "--kubeconfig", kc, "--handoff-dir", t.TempDir()},
			want: []string{"forbidden", "configmaps", apps}, waitExit: true,
		},
		{
			name: "the watcher's Lease",
			drop: func(r rbacv1.PolicyRule) bool { return r.Resources[0] == "leases" && len(r.ResourceNames) > 0 },
			role: []string{"watcher", "--kubeconfig", watcherKC, "--probe-addr=", "--metrics-addr=", "--lease-duration", "2s", "--renew-deadline", "1500ms", "--retry-period", "200ms"},
			want: []string{"forbidden", "least-watcher", "cannot get resource", "leases", "coordination.k8s.io"},
		},
		{
			name: "the Store",
			drop: func(r rbacv1.PolicyRule) bool { return r.Resources[0] == "stores" && len(r.ResourceNames) > 0 },
			role: []string{"admission", "--kubeconfig", kc, "--addr", vigiltest.FreeAddr(t), "--metrics-addr", "127.0.0.1:0", "--cert-secret", leastName + "-tls", "--cert-hosts", "127.0.0.1", "--register=false", "--handoff-dir", handoff},
			want: []string{"forbidden", "stores"}, waitExit: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			restore := dropRule(t, objs, tc.drop)
			defer restore()
			p := testkit.StartChild(t, "least", childEnv, tc.role...)
			if tc.waitExit {
				if code := p.Wait(t, 60*time.Second); code == 0 {
					t.Fatalf("%v succeeded without the rule:\n%s", tc.role[0], p.Output)
				}
			} else {
				testkit.Eventually(t, 30*time.Second, "a Forbidden in the output", func() bool { return len(forbiddenLines(p.Output.String())) > 0 })
			}
			out := strings.Join(forbiddenLines(p.Output.String()), "\n")
			for _, want := range tc.want {
				if !strings.Contains(out, want) {
					t.Errorf("without the rule, the output's Forbidden lacks %q:\n%s", want, p.Output)
				}
			}
		})
	}
}

func slicesContain(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// dropRule removes the matching rules from the applied Roles and
// ClusterRoles and returns a function that restores them. Each waits until
// the authorizer has followed the change, as SubjectAccessReviews for the
// subjects bound to the changed roles show: after the drop, each dropped rule
// has a verb they are denied; after the restore, every verb is allowed again.
func dropRule(t *testing.T, objs []*unstructured.Unstructured, drop func(rbacv1.PolicyRule) bool) (restore func()) {
	t.Helper()
	var changed []*unstructured.Unstructured
	var droppedRules []boundRule
	for _, o := range objs {
		if o.GetKind() != "Role" && o.GetKind() != "ClusterRole" {
			continue
		}
		role := &rbacv1.ClusterRole{}
		data, _ := o.MarshalJSON()
		if err := json.Unmarshal(data, role); err != nil {
			t.Fatal(err)
		}
		var keep []rbacv1.PolicyRule
		for _, r := range role.Rules {
			if drop(r) {
				droppedRules = append(droppedRules, boundRules(t, objs, o, r)...)
				continue
			}
			keep = append(keep, r)
		}
		if len(keep) == len(role.Rules) {
			continue
		}
		c := o.DeepCopy()
		rules := make([]any, 0, len(keep))
		for _, r := range keep {
			m := map[string]any{}
			b, _ := json.Marshal(r)
			_ = json.Unmarshal(b, &m)
			rules = append(rules, m)
		}
		c.Object["rules"] = rules
		changed = append(changed, c)
	}
	if len(changed) == 0 {
		t.Fatal("no derived rule matched: the sample is stale")
	}
	applyObjects(t, changed, false)
	// The authorizer's RBAC cache follows the change.
	vigiltest.Eventually(t, 10*time.Second, func() error {
		for _, br := range droppedRules {
			if len(br.denied(t)) == 0 {
				return fmt.Errorf("%s may still %v %v after the rule was dropped", br.user, br.rule.Verbs, br.rule.Resources)
			}
		}
		return nil
	})
	return func() {
		applyObjects(t, objs, false)
		vigiltest.Eventually(t, 10*time.Second, func() error {
			for _, br := range droppedRules {
				if denied := br.denied(t); len(denied) > 0 {
					return fmt.Errorf("%s is still denied %v %v after the rule was restored", br.user, denied, br.rule.Resources)
				}
			}
			return nil
		})
	}
}

// boundRule is a rule of a role as one subject bound to the role holds it.
type boundRule struct {
	user      string
	groups    []string
	namespace string // "" when bound cluster-wide
	rule      rbacv1.PolicyRule
}

// boundRules lists rule r of role as each subject of the bindings in objs
// that refer to role holds it.
func boundRules(t *testing.T, objs []*unstructured.Unstructured, role *unstructured.Unstructured, r rbacv1.PolicyRule) []boundRule {
	t.Helper()
	var out []boundRule
	for _, o := range objs {
		if o.GetKind() != "RoleBinding" && o.GetKind() != "ClusterRoleBinding" {
			continue
		}
		b := &rbacv1.RoleBinding{}
		data, _ := o.MarshalJSON()
		if err := json.Unmarshal(data, b); err != nil {
			t.Fatal(err)
		}
		if b.RoleRef.Kind != role.GetKind() || b.RoleRef.Name != role.GetName() || (role.GetKind() == "Role" && o.GetNamespace() != role.GetNamespace()) {
			continue
		}
		for _, s := range b.Subjects {
			br := boundRule{namespace: o.GetNamespace(), rule: r}
			switch s.Kind {
			case rbacv1.ServiceAccountKind:
				br.user = "system:serviceaccount:" + s.Namespace + ":" + s.Name
				br.groups = []string{"system:serviceaccounts", "system:serviceaccounts:" + s.Namespace, "system:authenticated"}
			case rbacv1.UserKind:
				br.user = s.Name
			case rbacv1.GroupKind:
				br.user, br.groups = "nobody-in-particular", []string{s.Name}
			}
			out = append(out, br)
		}
	}
	// A role's rights in a namespace other than the module's: ClusterRole
	// vigil:<ServiceAccount>:<namespace>, which the role binds there itself
	// (it has, having run before the rule is dropped).
	if parts := strings.Split(role.GetName(), ":"); role.GetKind() == "ClusterRole" && len(parts) == 3 {
		for _, o := range objs {
			if o.GetKind() == "ServiceAccount" && o.GetName() == parts[1] {
				out = append(out, boundRule{namespace: parts[2], rule: r, user: "system:serviceaccount:" + o.GetNamespace() + ":" + parts[1],
					groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + o.GetNamespace(), "system:authenticated"}})
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no binding in the manifests refers to %s %s", role.GetKind(), role.GetName())
	}
	return out
}

// denied asks the authorizer, verb by verb, whether the subject may do what
// the rule grants, and returns the verbs it is denied.
func (br boundRule) denied(t *testing.T) []string {
	t.Helper()
	var group, resource, name string
	if len(br.rule.APIGroups) > 0 {
		group = br.rule.APIGroups[0]
	}
	if len(br.rule.Resources) > 0 {
		resource = br.rule.Resources[0]
	}
	if len(br.rule.ResourceNames) > 0 {
		name = br.rule.ResourceNames[0]
	}
	var out []string
	for _, verb := range br.rule.Verbs {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: br.user, Groups: br.groups,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: br.namespace, Verb: verb, Group: group, Resource: resource, Name: name},
		}}
		if err := env.Client.Create(t.Context(), sar); err != nil {
			t.Fatal(err)
		}
		if !sar.Status.Allowed {
			out = append(out, verb)
		}
	}
	return out
}

// Every example module's manifests apply cleanly (server-side dry run), hold
// no wildcard, and are byte-for-byte the same from one run to the next.
func TestExampleManifestsApplyWithoutWildcards(t *testing.T) {
	dirs, err := filepath.Glob("../../examples/*/main.go")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no example modules found: %v", err)
	}
	sort.Strings(dirs)
	for _, mainFile := range dirs {
		dir := filepath.Dir(mainFile)
		name := filepath.Base(dir)
		t.Run(name, func(t *testing.T) {
			exe := vigiltest.BuildModule(t, "./"+dir)
			render := func() []byte {
				out, err := exec.Command(exe, "manifests", "--image", "example.com/"+name+":1.0.0").Output()
				if err != nil {
					var ee *exec.ExitError
					if errors.As(err, &ee) {
						t.Fatalf("%s manifests: %v\n%s", name, err, ee.Stderr)
					}
					t.Fatal(err)
				}
				return out
			}
			if out, err := exec.Command(exe, "plan").CombinedOutput(); err != nil || !strings.Contains(string(out), "deadlocks: none found") {
				t.Fatalf("%s plan: %v\n%s", name, err, out)
			}
			first, second := render(), render()
			if !bytes.Equal(first, second) {
				t.Fatalf("two runs of %s manifests differ", name)
			}
			objs := testkit.DecodeObjects(t, first)
			if len(objs) == 0 {
				t.Fatal("no objects")
			}
			for _, o := range objs {
				if o.GetLabels()["app.kubernetes.io/name"] == "" {
					t.Errorf("%s %s carries no module label", o.GetKind(), o.GetName())
				}
				if o.GetKind() != "Role" && o.GetKind() != "ClusterRole" {
					continue
				}
				rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
				for _, r := range rules {
					if strings.Contains(fmt.Sprint(r), "*") {
						t.Errorf("%s %s holds a wildcard: %v", o.GetKind(), o.GetName(), r)
					}
				}
			}
			// The namespace exists for real, so that the namespaced
			// objects' dry run is judged in it; the rest is a dry run.
			var nsObj []*unstructured.Unstructured
			var rest []*unstructured.Unstructured
			for _, o := range objs {
				if o.GetKind() == "Namespace" {
					nsObj = append(nsObj, o)
				} else {
					rest = append(rest, o)
				}
			}
			// Nothing else: no namespace a module governs need exist
			// for its manifests to install.
			applyObjects(t, nsObj, false)
			t.Cleanup(func() {
				for _, o := range nsObj {
					_ = newClient(t).Delete(context.Background(), o)
				}
			})
			applyObjects(t, rest, true)
		})
	}
}

// plan prints every derived rule with why it is there, and the webhooks'
// failure policy and registration mode.
func TestPlanShowsRBACAndWebhooks(t *testing.T) {
	m := leastModule("least-system", "apps")
	out := testkit.CaptureStdout(t, func() {
		if code := vigil.Execute(t.Context(), m, []string{"plan"}); code != 0 {
			t.Errorf("plan exit %d", code)
		}
	})
	for _, want := range []string{
		"RBAC, derived (`manifests` renders it) for the ServiceAccounts of namespace least-system",
		"least-watcher   least-system",
		"configmaps ",
		"gate configmap-settings (phase 0, manifests_test.go:",
		"the sync reconcile annotates ConfigMaps (declared at manifests_test.go:",
		"least-watcher",
		"leader election among the watcher's replicas",
		"registration when ready: fill the module's two webhook configurations",
		"a Lister of Secret keeps every object of the kind in a read cache",
		"failurePolicy Ignore until the canary proves the API server reaches the module, then Fail",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}
}

// plan names a rule's subresource after its group, as kubectl does:
// tenants.example.dev/status, not tenants/status.example.dev.
func TestPlanNamesSubresourcesAsKubectl(t *testing.T) {
	m := vigil.NewModule("subres", vigil.Options{Namespace: "subres-system"})
	m.OnSchedule("sync", vigil.Every(time.Minute), func(context.Context) error { return nil })
	m.RBAC("the reconcile writes the tenant's status", rbacv1.PolicyRule{APIGroups: []string{"example.dev"}, Resources: []string{"tenants", "tenants/status"}, Verbs: []string{"update"}})
	code, out := testkit.RunCapture(t, m, "plan")
	if code != 0 {
		t.Fatalf("plan exit %d:\n%s", code, out)
	}
	if !strings.Contains(out, " tenants.example.dev,tenants.example.dev/status ") || strings.Contains(out, "status.example.dev") {
		t.Errorf("plan does not name the subresource as tenants.example.dev/status:\n%s", out)
	}
}

// A rule RBAC declares goes to every ServiceAccount of the module unless For
// names the pods that need it: then each ServiceAccount gets only its own.
func TestRBACRuleForNamedPods(t *testing.T) {
	ns, apps := env.Namespace(t), env.Namespace(t)
	admin := newClient(t)
	const name = "scoped"
	m := vigil.NewModule(name, vigil.Options{Namespace: ns})
	vigil.WaitFor(m, &corev1.ConfigMap{}).InNamespace(apps).WithName("settings").ToBeCreated(nil)
	policy := m.Capability("policy", vigil.InNamespaces(apps))
	vigil.When(policy, &corev1.ConfigMap{}).IsCreated().Named("label").
		Mutate(func(context.Context, *vigil.Request[*corev1.ConfigMap]) error { return nil })
	m.OnSchedule("tick", vigil.Every(time.Minute), func(context.Context) error { return nil })
	m.RBAC("the schedule patches ConfigMaps", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"patch"}}, apps).For(vigil.Watcher)
	m.RBAC("a gate callback creates Secrets", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}}, apps).For(vigil.Gates)
	m.RBAC("everyone reads Services", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"get"}}, apps)
	if err := m.Verify(); err != nil {
		t.Fatal(err)
	}
	objs := testkit.RenderManifests(t, m)
	for _, o := range objs {
		if o.GetKind() == "ValidatingWebhookConfiguration" || o.GetKind() == "MutatingWebhookConfiguration" {
			t.Cleanup(func() { _ = admin.Delete(context.Background(), o.DeepCopy()) })
		}
	}
	applyObjects(t, objs, false)
	// Each role binds its rights in apps itself, as its ServiceAccount,
	// as it does the first time it is refused there.
	for pod, sa := range map[string]string{spec.PodAdmission: name, spec.PodWatcher: name + "-watcher"} {
		b, err := rolebind.NewBinder(env.AsServiceAccountConfig(ns, sa), name, pod, ns, logr.Discard())
		if err != nil {
			t.Fatal(err)
		}
		if exists, created, err := b.Bind(t.Context(), apps); !exists || !created || err != nil {
			t.Fatalf("%s binding its rights in %s: exists %v, created %v, %v", sa, apps, exists, created, err)
		}
	}
	testkit.Eventually(t, 10*time.Second, "the roles' bindings in force", func() bool {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: "system:serviceaccount:" + ns + ":" + name, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Resource: "services", Namespace: apps, Name: "x"},
		}}
		return admin.Create(t.Context(), sar) == nil && sar.Status.Allowed
	})
	for _, tc := range []struct {
		sa, verb, resource string
		want               bool
	}{
		{name + "-watcher", "patch", "configmaps", true},
		{name, "patch", "configmaps", false},
		{name, "create", "secrets", true},
		{name + "-watcher", "create", "secrets", false},
		{name, "get", "services", true},
		{name + "-watcher", "get", "services", true},
	} {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: "system:serviceaccount:" + ns + ":" + tc.sa, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: tc.verb, Resource: tc.resource, Namespace: apps, Name: "x"},
		}}
		if err := admin.Create(t.Context(), sar); err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed != tc.want {
			t.Errorf("ServiceAccount %s may %s %s in %s: %v, want %v", tc.sa, tc.verb, tc.resource, apps, sar.Status.Allowed, tc.want)
		}
	}
	code, out := testkit.RunCapture(t, m, "plan")
	if code != 0 || !strings.Contains(out, "a gate callback creates Secrets (declared at manifests_test.go:") || !strings.Contains(out, ", for the gates pods") {
		t.Errorf("plan (exit %d) does not say whom the gates' rule is for:\n%s", code, out)
	}
}

// A namespace's admin may create RoleBindings there, so she could take the
// name of a role's binding first, with a binding of her own, and keep the
// role refused in her namespace for good (its create would find the name
// taken). The binding guard reserves the name: under it, only the role's
// own binding may be made, by anyone. One made before the guard held is
// replaced by the role the next time it binds.
func TestATenantCannotTakeTheRolesBindingName(t *testing.T) {
	ns, apps := env.Namespace(t), env.Namespace(t)
	admin := newClient(t)
	const name = "squatted"
	sa := name + "-watcher"
	bindingName := spec.BindingName(sa)
	m := vigil.NewModule(name, vigil.Options{Namespace: ns})
	m.OnSchedule("tick", vigil.Every(time.Minute), func(context.Context) error { return nil })
	m.RBAC("the schedule patches ConfigMaps", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"patch"}}, apps).For(vigil.Watcher)
	if err := m.Verify(); err != nil {
		t.Fatal(err)
	}
	// Before the module is installed, the tenant (admin of apps) takes the
	// name with a binding of her own.
	tenant := env.AsTenant(t, apps, "tenant-of-"+apps, rbacv1.PolicyRule{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"rolebindings"}, Verbs: []string{"create", "update", "get"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}})
	squat := func(bname string) *rbacv1.RoleBinding {
		return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: bname},
			// The Role AsTenant made her, in each of her namespaces.
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "tenant-of-" + apps},
			Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: rbacv1.GroupName, Name: "tenant-of-" + apps}}}
	}
	objs := testkit.RenderManifests(t, m)
	var clusterRoleName string
	for _, o := range objs {
		if o.GetNamespace() == "" {
			t.Cleanup(func() { _ = admin.Delete(context.Background(), o.DeepCopy()) })
		}
		if o.GetKind() == "ClusterRole" && o.GetName() == spec.NamespaceRoleName(sa, apps) {
			clusterRoleName = o.GetName()
		}
	}
	if clusterRoleName == "" {
		t.Fatalf("the manifests ship no ClusterRole %s", spec.NamespaceRoleName(sa, apps))
	}
	taken := squat(bindingName)
	if err := tenant.Create(t.Context(), taken); err != nil {
		t.Fatalf("the tenant takes the name before the module is installed: %v", err)
	}
	applyObjects(t, objs, false)

	// The role binds its rights there as its ServiceAccount, as it does on
	// its first refusal: the tenant's binding is replaced by its own.
	b, err := rolebind.NewBinder(env.AsServiceAccountConfig(ns, sa), name, spec.PodWatcher, ns, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	if exists, created, err := b.Bind(t.Context(), apps); !exists || !created || err != nil {
		t.Fatalf("the watcher binding its rights over the tenant's binding: exists %v, created %v, %v", exists, created, err)
	}
	var got rbacv1.RoleBinding
	if err := admin.Get(t.Context(), client.ObjectKey{Namespace: apps, Name: bindingName}, &got); err != nil {
		t.Fatal(err)
	}
	if got.UID == taken.UID || got.RoleRef.Name != clusterRoleName || len(got.Subjects) != 1 || got.Subjects[0].Name != sa || got.Subjects[0].Namespace != ns {
		t.Fatalf("RoleBinding %s after the role bound: %s %s to %v (the tenant's was uid %s)", bindingName, got.UID, got.RoleRef.Name, got.Subjects, taken.UID)
	}
	testkit.Eventually(t, 10*time.Second, "the watcher's rights in force", func() bool {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: "system:serviceaccount:" + ns + ":" + sa, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "patch", Resource: "configmaps", Namespace: apps, Name: "x"},
		}}
		return admin.Create(t.Context(), sar) == nil && sar.Status.Allowed
	})
	// Bound again, it is the role's own: nothing changes.
	if _, created, err := b.Bind(t.Context(), apps); created || err != nil {
		t.Fatalf("binding again: created %v, %v", created, err)
	}

	// Once the guard holds, the tenant can neither take the name (in a
	// namespace the role has not bound yet) nor turn the role's binding
	// into hers; a binding under another name is hers to make.
	other := env.Namespace(t)
	tenantOther := env.AsTenant(t, other, "tenant-of-"+apps, rbacv1.PolicyRule{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"rolebindings"}, Verbs: []string{"create"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}})
	var refusal error
	testkit.Eventually(t, 20*time.Second, "the binding guard refusing the tenant the role's binding's name", func() bool {
		rb := squat(bindingName)
		rb.Namespace = other
		refusal = tenantOther.Create(t.Context(), rb)
		if refusal == nil {
			_ = admin.Delete(t.Context(), rb)
		}
		return refusal != nil
	})
	if !apierrors.IsForbidden(refusal) || !strings.Contains(refusal.Error(), bindingName) || !strings.Contains(refusal.Error(), "choose another name") {
		t.Errorf("the tenant's binding under the role's name: %v, want a refusal that names it and says what to do", refusal)
	}
	got.Subjects = []rbacv1.Subject{{Kind: "User", APIGroup: rbacv1.GroupName, Name: "tenant-of-" + apps}}
	if err := tenant.Update(t.Context(), &got); !apierrors.IsForbidden(err) {
		t.Errorf("the tenant turning the role's binding to herself: %v, want forbidden", err)
	}
	if err := tenant.Create(t.Context(), squat("tenants-own")); err != nil {
		t.Errorf("the tenant's binding under another name: %v", err)
	}
}

// For names containers vigil runs, at least one (an unknown kind of pod no
// longer compiles: vigil.Container is the one placement type).
func TestRBACForMistakes(t *testing.T) {
	m := vigil.NewModule("mistaken", vigil.Options{})
	rule := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}
	m.RBAC("a", rule).For()
	m.RBAC("b", rule).For(vigil.Phase(-1))
	err := m.Verify()
	if err == nil || !strings.Contains(err.Error(), "manifests_test.go:") || !strings.Contains(err.Error(), "For()") || !strings.Contains(err.Error(), `For(Phase(-1)): expected a phase of 0 or more`) {
		t.Fatalf("Verify() = %v, want both mistakes with their call site", err)
	}
}

// plan finds each kind of startup deadlock, spells out the cycle and exits
// 1; manifests refuses to print such a module unless --allow-deadlock.
func TestPlanFindsDeadlocks(t *testing.T) {
	noop := func(context.Context, *corev1.ConfigMap, vigil.Store) error { return nil }
	t.Run("a phase waits for what only a later phase creates", func(t *testing.T) {
		m := vigil.NewModule("later", vigil.Options{Namespace: "later-system"})
		vigil.WaitFor(m, &corev1.ConfigMap{}).InNamespace("apps").WithName("made-later").ToBeCreated(noop)
		vigil.WaitFor(m, &corev1.ConfigMap{}).InNamespace("apps").WithName("input").InPhase(1).ToBeCreated(noop).
			Creates(&corev1.ConfigMap{}, "apps", "made-later")
		code, out := testkit.RunCapture(t, m, "plan")
		if code != 1 || !strings.Contains(out, "deadlocks: 1 found") || !strings.Contains(out, "made-later") || !strings.Contains(out, "phase 1") {
			t.Fatalf("plan exit %d:\n%s", code, out)
		}
		code, out = testkit.RunCapture(t, m, "manifests", "--image", "example.com/later:1")
		if code != 1 || strings.Contains(out, "kind: Deployment") {
			t.Fatalf("manifests of a deadlocked module: exit %d, printed %d bytes", code, len(out))
		}
		code, out = testkit.RunCapture(t, m, "manifests", "--image", "example.com/later:1", "--allow-deadlock")
		if code != 0 || !strings.Contains(out, "kind: Deployment") {
			t.Fatalf("manifests --allow-deadlock: exit %d", code)
		}
	})
	t.Run("a gate waits for what its own fail-closed webhook must admit", func(t *testing.T) {
		m := vigil.NewModule("selfblock", vigil.Options{Namespace: "selfblock-system"})
		vigil.WaitFor(m, &corev1.ConfigMap{}).InNamespace("apps").WithLabel("team").ToBeCreated(noop)
		strict := m.Capability("strict", vigil.FailClosed(), vigil.InNamespaces("apps"))
		vigil.When(strict, &corev1.ConfigMap{}).IsCreated().Validate(func(context.Context, *vigil.Request[*corev1.ConfigMap]) vigil.Verdict { return admission.Allow() })
		code, out := testkit.RunCapture(t, m, "plan")
		if code != 1 || !strings.Contains(out, "deadlocks: 1 found") || !strings.Contains(out, "strict/") {
			t.Fatalf("plan exit %d:\n%s", code, out)
		}
	})
	t.Run("a named gated object is excluded from the module's own webhooks", func(t *testing.T) {
		m := vigil.NewModule("excluded", vigil.Options{Namespace: "excluded-system"})
		vigil.WaitFor(m, &corev1.ConfigMap{}).InNamespace("apps").WithName("settings").ToBeCreated(noop)
		strict := m.Capability("strict", vigil.FailClosed(), vigil.InNamespaces("apps"))
		vigil.When(strict, &corev1.ConfigMap{}).IsCreated().Validate(func(context.Context, *vigil.Request[*corev1.ConfigMap]) vigil.Verdict { return admission.Allow() })
		if code, out := testkit.RunCapture(t, m, "plan"); code != 0 || !strings.Contains(out, "deadlocks: none found") {
			t.Fatalf("plan exit %d:\n%s", code, out)
		}
	})
	t.Run("two modules wait on each other", func(t *testing.T) {
		a := vigil.NewModule("mod-a", vigil.Options{Namespace: "a-system"})
		vigil.WaitFor(a, &corev1.ConfigMap{}).InNamespace("shared").WithName("from-b").ToBeCreated(noop).Creates(&corev1.ConfigMap{}, "shared", "from-a")
		b := vigil.NewModule("mod-b", vigil.Options{Namespace: "b-system"})
		vigil.WaitFor(b, &corev1.ConfigMap{}).InNamespace("shared").WithName("from-a").ToBeCreated(noop).Creates(&corev1.ConfigMap{}, "shared", "from-b")
		for _, m := range []*vigil.Module{a, b} {
			if code, out := testkit.RunCapture(t, m, "plan"); code != 0 {
				t.Fatalf("%s alone: plan exit %d:\n%s", m.Name(), code, out)
			}
		}
		code, bJSON := testkit.RunCapture(t, b, "plan", "-o", "json")
		if code != 0 {
			t.Fatalf("plan -o json exit %d", code)
		}
		other := filepath.Join(t.TempDir(), "mod-b.json")
		if err := os.WriteFile(other, []byte(bJSON), 0o644); err != nil {
			t.Fatal(err)
		}
		code, out := testkit.RunCapture(t, a, "plan", "--with", other)
		if code != 1 || !strings.Contains(out, "together with mod-b: 1 found") || !strings.Contains(out, "mod-a") || !strings.Contains(out, "mod-b") {
			t.Fatalf("plan --with: exit %d:\n%s", code, out)
		}
	})
}
