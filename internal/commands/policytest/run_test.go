package policytest_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/commands/policytest"
	"github.com/vigilkit/vigil/internal/definition/define"
	"github.com/vigilkit/vigil/internal/definition/spec"
)

// shop is a module with one of each thing a case exercises: a mutation, a
// validation reading a lister, one reading the Store, a check the API
// server evaluates, a Warn capability, an opt-out label and a handler that
// panics.
func shop() *spec.Module {
	m := vigil.NewModule("shop", vigil.Options{Namespace: "shop-system"})
	labels := m.Capability("labels", vigil.OptOutLabel("shop.dev/skip", "group:shop-admins"))
	vigil.When(labels, &corev1.ConfigMap{}).IsCreated().Named("label").
		Mutate(func(_ context.Context, r *vigil.Request[*corev1.ConfigMap]) error {
			r.SetLabel("shop.dev/seen", "true")
			return nil
		})
	blocked := vigil.NewLister(m, &corev1.ConfigMap{}).InNamespace("shop-settings")
	vigil.When(labels, &corev1.ConfigMap{}).IsCreated().Named("blocked-namespaces").
		Validate(func(ctx context.Context, r *vigil.Request[*corev1.ConfigMap]) vigil.Verdict {
			if _, err := blocked.Get(ctx, "shop-settings", "block-"+r.Namespace); err == nil {
				return admission.Deny("namespace " + r.Namespace + " is blocked")
			}
			return admission.Allow()
		})
	vigil.When(labels, &corev1.ConfigMap{}).IsCreated().Named("frozen").
		Validate(func(ctx context.Context, r *vigil.Request[*corev1.ConfigMap]) vigil.Verdict {
			if v, _, err := vigil.StoreFrom(ctx).Module().Get("frozen"); err != nil || v == "true" {
				return admission.Deny("the shop is frozen")
			}
			return admission.Allow()
		})
	vigil.When(labels, &corev1.ConfigMap{}).IsCreated().Named("needs-app").
		Require(`has(object.metadata.labels) && 'app' in object.metadata.labels`, "the ConfigMap has no app label")
	soft := m.Capability("soft", vigil.Mode(vigil.ModeWarn))
	vigil.When(soft, &corev1.Secret{}).IsCreated().Named("secrets-need-owner").
		Validate(func(_ context.Context, r *vigil.Request[*corev1.Secret]) vigil.Verdict {
			if !r.HasLabel("owner") {
				return admission.Deny("Secret " + r.Name + " has no owner label")
			}
			return admission.Allow()
		})
	broken := m.Capability("broken")
	vigil.When(broken, &corev1.Service{}).IsCreated().Named("panics").
		Validate(func(context.Context, *vigil.Request[*corev1.Service]) vigil.Verdict { panic("boom") })
	s, mistakes, ok := define.Resolved(m)
	if !ok || mistakes != nil {
		panic(mistakes)
	}
	return s
}

func cases(t *testing.T, yaml string) []policytest.Case {
	t.Helper()
	cs, err := policytest.Parse("cases.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func TestCasesRunThroughTheModulesWebhooksInProcess(t *testing.T) {
	m := shop()
	cs := cases(t, `
name: labelled
object: {apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: apps, labels: {app: shop}}}
expect:
  allowed: true
  patch: [{op: add, path: /metadata/labels/shop.dev~1seen, value: "true"}]
---
name: no app label, denied by the check the API server runs
object: {apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: apps}}
expect: {allowed: false, message: "the ConfigMap has no app label"}
---
name: blocked by what the lister finds
object: {apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: apps, labels: {app: shop}}}
objects:
- {apiVersion: v1, kind: ConfigMap, metadata: {name: block-apps, namespace: shop-settings}}
expect: {allowed: false, message: "namespace apps is blocked"}
---
name: a lister outside its namespaces finds nothing
object: {apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: apps, labels: {app: shop}}}
objects:
- {apiVersion: v1, kind: ConfigMap, metadata: {name: block-apps, namespace: elsewhere}}
expect: {allowed: true}
---
name: frozen by the Store
object: {apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: apps, labels: {app: shop}}}
store: {frozen: "true"}
expect: {allowed: false, message: frozen}
---
name: opted out by its namespace's label
object: {apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: apps}}
objects:
- {apiVersion: v1, kind: Namespace, metadata: {name: apps, labels: {shop.dev/skip: "true"}}}
expect: {allowed: true}
---
name: the module's own namespace is never seen
object: {apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: shop-system}}
expect: {allowed: true}
---
name: Warn mode warns
object: {apiVersion: v1, kind: Secret, metadata: {name: s}}
expect: {allowed: true, warnings: ["Secret s has no owner label"]}
---
name: a panic is answered by the failure policy
object: {apiVersion: v1, kind: Service, metadata: {name: s}}
expect: {allowed: false, message: "panics"}
`)
	outcomes := policytest.RunAll(t.Context(), cs, policytest.InProcess(m))
	var report strings.Builder
	if failed := policytest.Report(&report, outcomes); failed > 0 {
		t.Fatalf("%d cases failed:\n%s", failed, report.String())
	}
	t.Log("\n" + report.String())
	if got := outcomes[0].Result.Object["metadata"].(map[string]any)["labels"].(map[string]any)["shop.dev/seen"]; got != "true" {
		t.Errorf("the object as admitted: labels %v; want shop.dev/seen=true", outcomes[0].Result.Object["metadata"])
	}
}

// A case that expects otherwise than the module answers fails, saying how.
func TestAFailingCaseSaysHowItDiffers(t *testing.T) {
	m := shop()
	cs := cases(t, `
name: wrong
object: {apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: apps}}
expect:
  allowed: true
  warnings: [something]
  patch: [{op: add, path: /metadata/labels/other}]
`)
	outcomes := policytest.RunAll(t.Context(), cs, policytest.InProcess(m))
	var report strings.Builder
	if policytest.Report(&report, outcomes) != 1 {
		t.Fatalf("the case passed:\n%s", report.String())
	}
	for _, want := range []string{
		"FAIL  wrong",
		`expected allowed, got denied by shop-labels-needs-app: "ValidatingAdmissionPolicy 'shop-labels-needs-app' with binding 'shop-labels-needs-app' denied request: the ConfigMap has no app label"`,
		`expected a warning containing "something", got none`,
		`expected the patch to add /metadata/labels/other, got [add /metadata/labels {"shop.dev/seen":"true"}]`,
		"FAIL  1 of 1 cases",
	} {
		if !strings.Contains(report.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, report.String())
		}
	}
}

func TestCaseFilesAreChecked(t *testing.T) {
	for name, tc := range map[string]struct{ yaml, want string }{
		"no expect":            {`object: {apiVersion: v1, kind: Pod, metadata: {name: p}}`, "expect.allowed is missing"},
		"no object":            {`expect: {allowed: true}`, "no object"},
		"unknown field":        {"object: {apiVersion: v1, kind: Pod}\nexpect: {allowed: true}\nexpected: {}", `unknown field "expected"`},
		"bad operation":        {"operation: PATCH\nobject: {apiVersion: v1, kind: Pod}\nexpect: {allowed: true}", `operation "PATCH"`},
		"message when allowed": {"object: {apiVersion: v1, kind: Pod}\nexpect: {allowed: true, message: x}", "a message is a denial's"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := policytest.Parse("bad.yaml", []byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "bad.yaml") {
				t.Fatalf("Parse: %v; want an error naming bad.yaml and containing %q", err, tc.want)
			}
		})
	}
}

func TestAnExpectedAddIsMadeByAnAddOfItsParent(t *testing.T) {
	parent := policytest.PatchOp{Op: "add", Path: "/metadata/labels", Value: []byte(`{"a/b":"x","c":"y"}`)}
	list := policytest.PatchOp{Op: "add", Path: "/spec/containers/0/securityContext", Value: []byte(`{"capabilities":{"drop":["ALL"]}}`)}
	for _, tc := range []struct {
		want policytest.PatchOp
		got  policytest.PatchOp
		ok   bool
	}{
		{policytest.PatchOp{Op: "add", Path: "/metadata/labels/a~1b", Value: []byte(`"x"`)}, parent, true},
		{policytest.PatchOp{Op: "add", Path: "/metadata/labels/c"}, parent, true},
		{policytest.PatchOp{Op: "add", Path: "/metadata/labels/a~1b", Value: []byte(`"y"`)}, parent, false},
		{policytest.PatchOp{Op: "add", Path: "/metadata/labels/d"}, parent, false},
		{policytest.PatchOp{Op: "replace", Path: "/metadata/labels/c"}, parent, false},
		{policytest.PatchOp{Op: "add", Path: "/spec/containers/0/securityContext/capabilities/drop/0", Value: []byte(`"ALL"`)}, list, true},
		{policytest.PatchOp{Op: "add", Path: "/spec/containers/0/securityContext/capabilities/drop/1"}, list, false},
		{policytest.PatchOp{Op: "add", Path: "/metadata/labels", Value: []byte(`{"c":"y","a/b":"x"}`)}, parent, true},
	} {
		c := policytest.Case{Expect: policytest.Expect{Allowed: new(bool), Patch: []policytest.PatchOp{tc.want}}}
		*c.Expect.Allowed = true
		diff := policytest.Diff(c, policytest.Result{Allowed: true, Webhooks: []string{"w"}, Patch: []policytest.PatchOp{tc.got}})
		if (len(diff) == 0) != tc.ok {
			t.Errorf("expected %s against %s: diff %q; want a match: %v", tc.want, tc.got, diff, tc.ok)
		}
	}
}
