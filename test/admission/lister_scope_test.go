package admission

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/testsupport/testkit"
	"github.com/vigilkit/vigil/vigiltest"
)

// A lister scoped with InNamespace gets rights in each of its namespaces to
// read its kind (a ClusterRole per namespace, which the role binds there),
// and no cluster-wide rule for it: its informer cannot list or watch
// anything else. plan says what its informer selects.
func TestScopedListerRBACIsARoleInItsNamespaces(t *testing.T) {
	m := vigil.NewModule("scoped", vigil.Options{Namespace: "scoped-system"})
	vigil.NewLister(m, vigil.Kind("uds.dev", "v1alpha1", "Exemption")).InNamespace("uds-policy-exemptions", "more-exemptions")
	vigil.NewLister(m, vigil.Kind("uds.dev", "v1alpha1", "ClusterConfig"))
	vigil.When(m.Capability("policies"), &corev1.Pod{}).IsCreated().
		Validate(func(context.Context, *vigil.Request[*corev1.Pod]) vigil.Verdict { return admission.Allow() })
	roles := map[string][]rbacv1.PolicyRule{} // "Kind namespace" → rules
	for _, o := range testkit.RenderManifests(t, m) {
		if o.GetKind() != "Role" && o.GetKind() != "ClusterRole" {
			continue
		}
		var r rbacv1.Role
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &r); err != nil {
			t.Fatal(err)
		}
		k := o.GetKind() + " " + o.GetNamespace()
		if i := strings.LastIndex(o.GetName(), ":"); o.GetKind() == "ClusterRole" && strings.Count(o.GetName(), ":") == 2 {
			k = "Role " + o.GetName()[i+1:] // the rights in one namespace: ClusterRole vigil:<sa>:<namespace>, bound there by the role
		}
		roles[k] = append(roles[k], r.Rules...)
	}
	reads := func(k, resource string) bool {
		for _, r := range roles[k] {
			if slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, "watch") && slices.Contains(r.Verbs, "list") {
				return true
			}
		}
		return false
	}
	for _, ns := range []string{"uds-policy-exemptions", "more-exemptions"} {
		if !reads("Role "+ns, "exemptions") {
			t.Errorf("no Role in %s to list and watch exemptions: %v", ns, roles)
		}
	}
	if reads("ClusterRole ", "exemptions") {
		t.Errorf("a ClusterRole lists and watches exemptions: the scoped lister's informer could cache every namespace's: %v", roles["ClusterRole "])
	}
	if !reads("ClusterRole ", "clusterconfigs") {
		t.Errorf("the cluster-wide lister of ClusterConfigs has no ClusterRole rule: %v", roles["ClusterRole "])
	}
	code, out := testkit.RunCapture(t, m, "plan")
	if code != 0 || !strings.Contains(out, "Exemption: namespaces more-exemptions,uds-policy-exemptions") {
		t.Errorf("plan (exit %d) does not say the Exemption informer selects its two namespaces:\n%s", code, out)
	}
}

// InNamespace with no namespace, or an empty one, is a definition mistake.
func TestScopedListerNeedsNamespaces(t *testing.T) {
	m := vigil.NewModule("scoped", vigil.Options{Namespace: "scoped-system"})
	vigil.NewLister(m, vigil.Kind("uds.dev", "v1alpha1", "Exemption")).InNamespace("")
	if err := m.Verify(); err == nil || !strings.Contains(err.Error(), "lister_scope_test.go:") || !strings.Contains(err.Error(), "expected one or more namespace names, none empty") {
		t.Errorf("Verify() = %v, want the mistake at its call site", err)
	}
}

// A kind whose CRD names an irregular plural (UDS Core's ClusterConfig is
// clusterconfig) is read, watched and admitted under that resource: the
// RBAC rule names it, not the plural Kubernetes would guess. A plural that
// is no resource name is refused at definition, with the call.
func TestKindWithPluralNamesTheResource(t *testing.T) {
	m := vigil.NewModule("plural", vigil.Options{Namespace: "plural-system"})
	vigil.NewLister(m, vigil.KindWithPlural("plural.example", "v1", "Setting", "setting"))
	vigil.When(m.Capability("policies"), &corev1.Pod{}).IsCreated().
		Validate(func(context.Context, *vigil.Request[*corev1.Pod]) vigil.Verdict { return admission.Allow() })
	var rules []rbacv1.PolicyRule
	for _, o := range testkit.RenderManifests(t, m) {
		if o.GetKind() != "ClusterRole" {
			continue
		}
		var r rbacv1.ClusterRole
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &r); err != nil {
			t.Fatal(err)
		}
		rules = append(rules, r.Rules...)
	}
	var named, guessed bool
	for _, r := range rules {
		if slices.Contains(r.APIGroups, "plural.example") {
			named = named || slices.Contains(r.Resources, "setting")
			guessed = guessed || slices.Contains(r.Resources, "settings")
		}
	}
	if !named || guessed {
		t.Errorf("ClusterRole rules for plural.example %v: want the resource setting, not settings", rules)
	}

	defer func() {
		msg, _ := recover().(string)
		if !strings.Contains(msg, "lister_scope_test.go") || !strings.Contains(msg, `the plural: expected a lowercase resource name`) {
			t.Errorf("KindWithPlural with plural \"Settings\": panic %q, want one naming the call and what a plural is", msg)
		}
	}()
	vigil.KindWithPlural("plural.example", "v1", "Setting", "Settings")
}

// A kind's plural is the module's: another module of the process that
// names the kind without it gets the resource Kubernetes guesses, and one
// module that gives a kind two plurals is told so, with both call sites.
func TestAKindsPluralIsTheModules(t *testing.T) {
	resources := func(m *vigil.Module) []string {
		var out []string
		for _, o := range testkit.RenderManifests(t, m) {
			if o.GetKind() != "ClusterRole" {
				continue
			}
			var r rbacv1.ClusterRole
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &r); err != nil {
				t.Fatal(err)
			}
			for _, rule := range r.Rules {
				if slices.Contains(rule.APIGroups, "plural.example") {
					out = append(out, rule.Resources...)
				}
			}
		}
		slices.Sort(out)
		return slices.Compact(out) // the rule of each role that reads it
	}
	named := vigil.NewModule("named", vigil.Options{Namespace: "named-system"})
	vigil.NewLister(named, vigil.KindWithPlural("plural.example", "v1", "Widget", "widget"))
	guessed := vigil.NewModule("guessed", vigil.Options{Namespace: "guessed-system"})
	vigil.NewLister(guessed, vigil.Kind("plural.example", "v1", "Widget"))
	for _, m := range []*vigil.Module{named, guessed} {
		vigil.When(m.Capability("policies"), &corev1.Pod{}).IsCreated().
			Validate(func(context.Context, *vigil.Request[*corev1.Pod]) vigil.Verdict { return admission.Allow() })
	}
	if got := resources(named); !slices.Equal(got, []string{"widget"}) {
		t.Errorf("the module with KindWithPlural: resources %q of plural.example, want [widget]", got)
	}
	if got := resources(guessed); !slices.Equal(got, []string{"widgets"}) {
		t.Errorf("the module with Kind, beside one with KindWithPlural: resources %q of plural.example, want [widgets]", got)
	}

	twice := vigil.NewModule("twice", vigil.Options{Namespace: "twice-system"})
	vigil.NewLister(twice, vigil.KindWithPlural("plural.example", "v1", "Widget", "widget"))
	vigil.NewLister(twice, vigil.KindWithPlural("plural.example", "v1", "Widget", "widgetz"))
	err := twice.Verify()
	if err == nil || strings.Count(err.Error(), "lister_scope_test.go:") < 2 || !strings.Contains(err.Error(), "a kind has one plural") {
		t.Errorf("one kind given two plurals: Verify() = %v, want a mistake naming both call sites and that a kind has one plural", err)
	}
}

// Lister.Find counts only what it matched as found: an allow that looked
// for a ConfigMap naming the Pod, among others that do not, is not made
// again on fresh data, where one that listed them all is; an allow that
// found its ConfigMap is.
func TestFindCountsOnlyMatchesAsFound(t *testing.T) {
	ctx := t.Context()
	apps := env.Namespace(t)
	home := env.Namespace(t)
	for _, n := range []string{"unrelated-1", "unrelated-2", "names-found"} {
		if err := env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: n}}); err != nil {
			t.Fatal(err)
		}
	}
	m := vigil.NewModule("finder", vigil.Options{Namespace: home})
	cms := vigil.NewLister(m, &corev1.ConfigMap{}).InNamespace(apps)
	naming := func(pod string) func(*corev1.ConfigMap) bool {
		return func(cm *corev1.ConfigMap) bool { return cm.Name == "names-"+pod }
	}
	c := m.Capability("finder", vigil.InNamespaces(apps))
	vigil.When(c, &corev1.Pod{}).IsCreated().Named("find").Validate(func(ctx context.Context, r *vigil.Request[*corev1.Pod]) vigil.Verdict {
		if r.Object.Labels["how"] != "find" {
			return admission.Allow()
		}
		if _, err := cms.Find(ctx, naming(r.Name), client.InNamespace(r.Namespace)); err != nil {
			return admission.Deny(err.Error())
		}
		return admission.Allow()
	})
	vigil.When(c, &corev1.Pod{}).IsCreated().Named("list").Validate(func(ctx context.Context, r *vigil.Request[*corev1.Pod]) vigil.Verdict {
		if r.Object.Labels["how"] != "list" {
			return admission.Allow()
		}
		if _, err := cms.List(ctx, client.InNamespace(r.Namespace)); err != nil {
			return admission.Deny(err.Error())
		}
		return admission.Allow()
	})
	srv := serveAdmission(t, m, "finder", []string{apps})
	rechecked := func(binding string) string {
		return testkit.GrepLines(testkit.GrepLines(testkit.Scrape(t, testkit.MetricsURL(srv.Addr)), "vigil_admission_rechecks_total{"), `binding="`+binding+`"`)
	}
	for i, c := range []struct{ name, how string }{{"nothing", "find"}, {"found", "find"}, {"all", "list"}} {
		pod := testkit.TestPod(apps, c.name, map[string]string{"how": c.how}, false)
		vigiltest.Eventually(t, 15*time.Second, func() error {
			_ = env.Client.Delete(ctx, pod)
			pod.ResourceVersion = ""
			if err := env.Client.Create(ctx, pod); err != nil {
				return err
			}
			if i == 0 && rechecked("find") == "" && !strings.Contains(testkit.Scrape(t, testkit.MetricsURL(srv.Addr)), `binding="find"`) {
				return fmt.Errorf("the module has not judged a Pod yet")
			}
			return nil
		})
	}
	if got := rechecked("find"); !strings.Contains(got, `} 1`) {
		t.Errorf("rechecks of the Find binding: %q; want exactly one, for the Pod whose ConfigMap it found", got)
	}
	if got := rechecked("list"); got == "" {
		t.Errorf("rechecks of the List binding: none; want its allow after a List that returned objects made again")
	}
}
