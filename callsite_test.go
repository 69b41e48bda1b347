package vigil_test

import (
	"context"
	"fmt"
	goruntime "runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/admission"
)

// at runs declare and returns the line at's call is on, where declare's
// mistake is to be reported.
func at(declare func()) int {
	_, _, line, _ := goruntime.Caller(1)
	declare()
	return line
}

// Every public entry that can record a definition mistake reports it at the
// author's line: the call site is captured once, at the entry, whatever
// helpers lie between it and the check.
func TestEveryMistakeNamesTheAuthorsLine(t *testing.T) {
	cm := &corev1.ConfigMap{}
	allow := func(context.Context, *vigil.Request[*corev1.ConfigMap]) vigil.Verdict { return admission.Allow() }
	none := func(context.Context, *corev1.ConfigMap) error { return nil }
	rule := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}
	for _, tc := range []struct {
		name    string
		declare func(m *vigil.Module, c *vigil.Capability) int
		want    string
	}{
		{"NewModule", func(*vigil.Module, *vigil.Capability) int {
			var m *vigil.Module
			line := at(func() { m = vigil.NewModule("Bad_Name", vigil.Options{}) })
			// The module under test is replaced: report through this one.
			if err := m.Verify(); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("callsite_test.go:%d:", line)) {
				t.Errorf("NewModule: %v, want line %d", err, line)
			}
			return -1
		}, ""},
		{"Capability", func(m *vigil.Module, _ *vigil.Capability) int { return at(func() { m.Capability("Bad_Name") }) }, "capability name"},
		{"InNamespaces its webhooks skip", func(m *vigil.Module, _ *vigil.Capability) int {
			// The module runs in vigil-system; kube-system is skipped too.
			return at(func() { m.Capability("skipped", vigil.InNamespaces(vigil.DefaultNamespace, "kube-system")) })
		}, "its webhooks never see these namespaces"},
		{"FailOpenAfter", func(m *vigil.Module, _ *vigil.Capability) int {
			return at(func() { m.Capability("fo", vigil.FailOpenAfter(0)) })
		}, "FailOpenAfter(0s)"},
		{"OptOutLabel", func(m *vigil.Module, _ *vigil.Capability) int {
			return at(func() { m.Capability("oo", vigil.OptOutLabel("kubernetes.io/skip", "alice")) })
		}, "OptOutLabel"},
		{"When.Named", func(_ *vigil.Module, c *vigil.Capability) int {
			return at(func() { vigil.When(c, cm).Named("Bad_Name") })
		}, "binding name"},
		{"When.Subresource", func(_ *vigil.Module, c *vigil.Capability) int {
			return at(func() { vigil.When(c, cm).Subresource("scale") })
		}, `Subresource("scale")`},
		{"InNamespaceRegex", func(_ *vigil.Module, c *vigil.Capability) int {
			return at(func() { vigil.When(c, cm).InNamespaceRegex("(") })
		}, "InNamespaceRegex"},
		{"WithNameRegex", func(_ *vigil.Module, c *vigil.Capability) int {
			return at(func() { vigil.Watch(c, cm).WithNameRegex("(") })
		}, "WithNameRegex"},
		{"Validate", func(_ *vigil.Module, c *vigil.Capability) int {
			return at(func() { vigil.When(c, cm).Validate(allow) })
		}, "Validate: no operation"},
		{"filtered Mutate", func(_ *vigil.Module, c *vigil.Capability) int {
			return at(func() {
				vigil.When(c, cm).WithLabel("a").Mutate(func(context.Context, *vigil.Request[*corev1.ConfigMap]) error { return nil })
			}) + 1
		}, "Mutate: no operation"},
		{"Require", func(_ *vigil.Module, c *vigil.Capability) int {
			return at(func() { vigil.When(c, cm).Require("true", "never") })
		}, "Require: no operation"},
		{"Watch.Named", func(_ *vigil.Module, c *vigil.Capability) int {
			return at(func() { vigil.Watch(c, cm).Named("Bad_Name") })
		}, "binding name"},
		{"OnEvent", func(_ *vigil.Module, c *vigil.Capability) int {
			return at(func() {
				vigil.Watch(c, cm).OnEvent(func(context.Context, *corev1.ConfigMap, vigil.WatchEvent) {}, "BOGUS")
			}) + 1
		}, `event "BOGUS"`},
		{"Reconcile twice", func(_ *vigil.Module, c *vigil.Capability) int {
			vigil.Watch(c, cm).Named("same").Reconcile(none)
			return at(func() { vigil.Watch(c, cm).Named("same").Reconcile(none) })
		}, "already declared"},
		{"OnSchedule", func(m *vigil.Module, _ *vigil.Capability) int {
			return at(func() { m.OnSchedule("s", vigil.Cron("never"), func(context.Context) error { return nil }) })
		}, `Cron("never")`},
		{"InPhase", func(m *vigil.Module, _ *vigil.Capability) int {
			return at(func() { vigil.WaitFor(m, cm).WithName("a").InPhase(-1).ToBeCreated(nil) })
		}, "InPhase(-1)"},
		{"gate Named", func(m *vigil.Module, _ *vigil.Capability) int {
			return at(func() { vigil.WaitFor(m, cm).WithName("a").Named("Bad Name").ToBeCreated(nil) })
		}, "gate name"},
		{"Timeout", func(m *vigil.Module, _ *vigil.Capability) int {
			return at(func() { vigil.WaitFor(m, cm).WithName("a").Timeout(-1).ToBeCreated(nil) })
		}, "Timeout(-1ns)"},
		{"ToBe", func(m *vigil.Module, _ *vigil.Capability) int {
			return at(func() { vigil.WaitFor(m, cm).WithName("a").ToBe() })
		}, "ToBe(): expected at least one condition"},
		{"AtLeast", func(m *vigil.Module, _ *vigil.Capability) int {
			return at(func() { vigil.WaitFor(m, cm).WithLabel("a").AtLeast(0).ToBeGone() })
		}, "AtLeast(0)"},
		{"All on a name", func(m *vigil.Module, _ *vigil.Capability) int {
			return at(func() { vigil.WaitFor(m, cm).WithName("a").All().ToBeGone() })
		}, "All/Any/AtLeast"},
		{"two outcomes", func(m *vigil.Module, _ *vigil.Capability) int {
			return at(func() { vigil.WaitFor(m, cm).WithName("a").ToBeCreated(nil).ToBeGone() })
		}, "ToBeGone after ToBeCreated"},
		{"two callbacks", func(m *vigil.Module, _ *vigil.Capability) int {
			then := func(context.Context, *corev1.ConfigMap, vigil.Store) error { return nil }
			return at(func() { vigil.WaitFor(m, cm).WithName("a").ToBeCreated(then).Then(then) })
		}, "a gate has one callback"},
		{"gate InNamespace", func(m *vigil.Module, _ *vigil.Capability) int {
			return at(func() { vigil.WaitFor(m, cm).InNamespace("Bad_NS").ToBeGone() })
		}, "not a namespace name"},
		{"gate WithLabelValue", func(m *vigil.Module, _ *vigil.Capability) int {
			return at(func() { vigil.WaitFor(m, cm).WithLabelValue("a b", "c").ToBeGone() })
		}, `WithLabelValue("a b")`},
		{"Sample", func(m *vigil.Module, _ *vigil.Capability) int {
			return at(func() {
				vigil.Sample(m, func(context.Context) (int, error) { return 1, nil }, vigil.Every(0)).ToMatch(nil)
			}) + 1
		}, "Sample: Every(0s)"},
		{"SampleTimeout", func(m *vigil.Module, _ *vigil.Capability) int {
			return at(func() {
				vigil.Sample(m, func(context.Context) (int, error) { return 1, nil }, vigil.Every(time.Second)).SampleTimeout(0).ToMatch(nil)
			}) + 1
		}, "SampleTimeout(0s)"},
		{"Env", func(m *vigil.Module, _ *vigil.Capability) int {
			return at(func() { vigil.Env(m, "1X").Value("a").For(vigil.Admission) })
		}, `Env("1X")`},
		{"Env Value twice", func(m *vigil.Module, _ *vigil.Capability) int {
			return at(func() { vigil.Env(m, "X").Value("a").Value("b").For(vigil.Admission) })
		}, "a variable has one value"},
		{"FromSecret twice", func(m *vigil.Module, _ *vigil.Capability) int {
			return at(func() { vigil.Env(m, "Y").Value("a").FromSecret("s", "k").For(vigil.Admission) })
		}, "FromSecret after Value"},
		{"Env For", func(m *vigil.Module, _ *vigil.Capability) int {
			return at(func() { vigil.Env(m, "Z").Value("a").For() })
		}, "For(): expected at least one container"},
		{"MountSecret", func(m *vigil.Module, _ *vigil.Capability) int {
			return at(func() { vigil.MountSecret(m, "s", "etc").For(vigil.Admission) })
		}, "expected an absolute, clean mount path"},
		{"MountConfigMap Keys", func(m *vigil.Module, _ *vigil.Capability) int {
			return at(func() { vigil.MountConfigMap(m, "c", "/etc/c").Keys().For(vigil.Admission) })
		}, "Keys(): expected at least one key"},
		{"Mount For", func(m *vigil.Module, _ *vigil.Capability) int {
			return at(func() { vigil.MountConfigMap(m, "d", "/etc/d").For() })
		}, "For(): expected at least one container"},
		{"RBAC", func(m *vigil.Module, _ *vigil.Capability) int {
			return at(func() {
				m.RBAC("all", rbacv1.PolicyRule{APIGroups: []string{"*"}, Resources: []string{"pods"}, Verbs: []string{"get"}})
			}) + 1
		}, "is a wildcard"},
		{"RBAC For", func(m *vigil.Module, _ *vigil.Capability) int { return at(func() { m.RBAC("r", rule).For() }) }, "RBAC(...).For()"},
		{"Lister InNamespace", func(m *vigil.Module, _ *vigil.Capability) int {
			return at(func() { vigil.NewLister(m, cm).InNamespace("") })
		}, "InNamespace"},
		{"TrustedNamespace twice", func(m *vigil.Module, _ *vigil.Capability) int {
			vigil.TrustedNamespace(m, "trusted")
			return at(func() { vigil.TrustedNamespace(m, "trusted") })
		}, "already declared"},
		{"Backoff", func(_ *vigil.Module, c *vigil.Capability) int {
			return at(func() { vigil.Watch(c, cm).Backoff(0, time.Second).Reconcile(none) })
		}, "Backoff(0s, 1s): expected a first delay above 0"},
		{"Backoff on OnEvent", func(_ *vigil.Module, c *vigil.Capability) int {
			return at(func() {
				vigil.Watch(c, cm).Backoff(time.Second, time.Minute).OnEvent(func(context.Context, *corev1.ConfigMap, vigil.WatchEvent) {})
			}) + 1
		}, "OnEvent handlers are not retried by back-off"},
		{"Backoff shorter max", func(_ *vigil.Module, c *vigil.Capability) int {
			return at(func() { vigil.Watch(c, cm).Backoff(time.Second, time.Millisecond).Reconcile(none) })
		}, "expected max >= initial"},
		{"Completions", func(m *vigil.Module, _ *vigil.Capability) int {
			return at(func() {
				m.OnSchedule("once", vigil.Every(time.Hour), func(context.Context) error { return nil }, vigil.Completions(0))
			}) + 1
		}, `OnSchedule("once"): Completions(0): expected 1 or more runs`},
		{"StartingAt", func(m *vigil.Module, _ *vigil.Capability) int {
			return at(func() {
				m.OnSchedule("later", vigil.Every(time.Hour), func(context.Context) error { return nil }, vigil.StartingAt(time.Time{}))
			}) + 1
		}, `OnSchedule("later"): StartingAt(`},
		{"Setting named VIGIL_", func(m *vigil.Module, _ *vigil.Capability) int {
			return at(func() { vigil.Setting(m, "VIGIL_LIMIT", "3") })
		}, "names starting with VIGIL_ are vigil's own"},
		{"SettingAs a value that does not parse", func(m *vigil.Module, _ *vigil.Capability) int {
			t.Setenv("CALLSITE_TIMEOUT", "soon")
			var got time.Duration
			line := at(func() { got = vigil.SettingAs(m, "CALLSITE_TIMEOUT", "2m", time.ParseDuration) })
			if got != 2*time.Minute {
				t.Errorf("SettingAs with a value that does not parse = %s, want the default 2m", got)
			}
			return line
		}, `CALLSITE_TIMEOUT="soon" does not parse: time: invalid duration "soon": set a value that does, or unset it for the default "2m"`},
		{"SettingAs a default that does not parse", func(m *vigil.Module, _ *vigil.Capability) int {
			return at(func() { vigil.SettingAs(m, "CALLSITE_UNSET_LIMIT", "three", strconv.Atoi) })
		}, `Setting("CALLSITE_UNSET_LIMIT"): the default "three" does not parse`},
		{"NamespaceProvenance twice", func(m *vigil.Module, _ *vigil.Capability) int {
			vigil.NamespaceProvenance(m)
			return at(func() { vigil.NamespaceProvenance(m) })
		}, "already declared"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := vigil.NewModule("mod", vigil.Options{})
			line := tc.declare(m, m.Capability("c"))
			if line < 0 {
				return
			}
			err := m.Verify()
			want := fmt.Sprintf("callsite_test.go:%d: ", line)
			if err == nil {
				t.Fatalf("Verify() = nil, want %q at line %d", tc.want, line)
			}
			for _, e := range strings.Split(err.Error(), "\n") {
				if strings.Contains(e, tc.want) {
					if !strings.HasPrefix(e, want) {
						t.Errorf("mistake %q, want it at %s", e, want)
					}
					return
				}
			}
			t.Errorf("Verify() = %v, want %q", err, tc.want)
		})
	}
}

// A capability limited to namespaces its webhooks skip is refused; one that
// also names a namespace they see is not.
func TestACapabilityOnlyInSkippedNamespacesIsRefused(t *testing.T) {
	m := vigil.NewModule("mod", vigil.Options{Namespace: "mod-system"})
	m.Capability("partly", vigil.InNamespaces("mod-system", "apps"))
	if err := m.Verify(); err != nil {
		t.Fatalf("a capability in mod-system and apps: %v, want it accepted", err)
	}
	m.Capability("never", vigil.InNamespaces("mod-system", "kube-node-lease"))
	err := m.Verify()
	if err == nil || !strings.Contains(err.Error(), "capability never: InNamespaces(mod-system, kube-node-lease): its webhooks never see these namespaces") ||
		!strings.Contains(err.Error(), "kube-node-lease, kube-system, mod-system") {
		t.Fatalf("Verify() = %v, want the capability refused, naming the namespaces vigil's webhooks skip", err)
	}
}
