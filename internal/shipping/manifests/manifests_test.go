package manifests

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/serving/registration"
)

var cm = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}

func sample() *spec.Module {
	settings := spec.ObjectOf(cm, "apps", "settings")
	initial := spec.ObjectOf(schema.GroupVersionKind{Group: "uds.dev", Version: "v1alpha1", Kind: "ClusterConfig"}, "", "initial")
	return &spec.Module{
		Name: "uds-core", Namespace: "uds-system", Version: "1.2.3",
		Phases: spec.GroupPhases([]spec.Gate{
			{Name: "settings", Phase: 2, Waits: &settings, Site: "main.go:1"},
			{Name: "crd", Phase: 0, Waits: &initial, Site: "main.go:2"},
		}),
		Bindings: []spec.Binding{{Capability: "policy", Name: "deny", GVK: cm, Action: spec.Validate, Operations: []admissionv1.Operation{admissionv1.Create}}},
		Watches:  []spec.Watch{{Capability: "policy", Name: "sync", Role: spec.RoleReconcile, GVK: cm, Select: spec.Selection{Namespaces: []string{"apps"}, Name: "settings"}, Site: "main.go:3"}},
	}
}

func TestRulesNarrowToNamespacesAndNames(t *testing.T) {
	m := sample()
	rules := Rules(m)
	var found bool
	for _, r := range rules {
		if r.Why == "" {
			t.Errorf("rule %v has no why", r.PolicyRule)
		}
		if r.Namespace == "apps" && r.Resources[0] == "configmaps" && strings.Join(r.Verbs, ",") == "get,list,watch" {
			found = true
			if len(r.ResourceNames) != 1 || r.ResourceNames[0] != "settings" {
				t.Errorf("the gate's and the watch's read of one named ConfigMap is not narrowed to it: %+v", r)
			}
		}
	}
	if !found {
		t.Fatalf("no read of ConfigMaps in apps among %+v", rules)
	}
	for _, merged := range Merge(rules) {
		if w := Wildcards(merged.Rules); len(w) > 0 {
			t.Errorf("wildcards: %v", w)
		}
	}
	if w := Wildcards([]rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"*"}, Verbs: []string{"get"}}}); len(w) != 1 {
		t.Errorf("a wildcard resource went unnoticed: %v", w)
	}
}

func TestMergeUnitesVerbsDeterministically(t *testing.T) {
	rules := []spec.Rule{
		{Namespace: "b", PolicyRule: rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"watch", "get"}}},
		{Namespace: "a", PolicyRule: rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "get"}}},
		{Namespace: "b", PolicyRule: rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}}},
	}
	got := Merge(rules)
	if len(got) != 2 || got[0].Namespace != "a" || strings.Join(got[1].Rules[0].Verbs, ",") != "get,list,watch" {
		t.Fatalf("merged: %+v", got)
	}
}

func TestRenderDeploymentShape(t *testing.T) {
	objs, err := Render(sample(), Options{Image: "example.com/uds-core:1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	var dep *appsv1.Deployment
	var pdbs int
	for _, o := range objs {
		if o.GetLabels()["app.kubernetes.io/name"] != "uds-core" || o.GetLabels()["app.kubernetes.io/version"] != "1.2.3" {
			t.Errorf("%T %s lacks the module's name and version labels", o, o.GetName())
		}
		switch v := o.(type) {
		case *appsv1.Deployment:
			if v.Name == "uds-core" {
				dep = v
			}
		case *policyv1.PodDisruptionBudget:
			pdbs++
		}
	}
	if dep == nil || pdbs != 2 {
		t.Fatalf("admission Deployment %v, PodDisruptionBudgets %d", dep != nil, pdbs)
	}
	spec := dep.Spec.Template.Spec
	var inits []string
	for _, c := range spec.InitContainers {
		inits = append(inits, c.Name+" "+strings.Join(c.Args, " "))
	}
	if strings.Join(inits, "; ") != "gate-phase-0 gate --phase 0; gate-phase-2 gate --phase 2" {
		t.Fatalf("init containers: %v", inits)
	}
	if *dep.Spec.Replicas != 2 || dep.Spec.Strategy.RollingUpdate.MaxUnavailable.IntValue() != 0 {
		t.Errorf("replicas %d, maxUnavailable %v", *dep.Spec.Replicas, dep.Spec.Strategy.RollingUpdate.MaxUnavailable)
	}
	c := spec.Containers[0]
	sc := c.SecurityContext
	if !*sc.RunAsNonRoot || !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation || c.ReadinessProbe.HTTPGet.Path != "/readyz" || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("main container: %+v", c)
	}
	env := map[string]bool{}
	for _, e := range c.Env {
		env[e.Name] = true
	}
	for _, want := range []string{"POD_NAME", "POD_NAMESPACE", "POD_UID"} {
		if !env[want] {
			t.Errorf("no %s from the downward API", want)
		}
	}
	if spec.Volumes[0].EmptyDir == nil || c.VolumeMounts[0].MountPath != HandoffDir {
		t.Errorf("no handoff emptyDir at %s", HandoffDir)
	}
	if spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm.TopologyKey != corev1.LabelHostname {
		t.Error("no preferred anti-affinity across nodes")
	}
	a, _ := YAML(objs)
	objs2, _ := Render(sample(), Options{Image: "example.com/uds-core:1.2.3"})
	b, _ := YAML(objs2)
	if !bytes.Equal(a, b) {
		t.Fatal("two renders differ")
	}
	if _, err := Render(sample(), Options{}); err == nil || !strings.Contains(err.Error(), "--image") {
		t.Fatalf("no image: %v", err)
	}
}

// A capability's opt-out label ships with its guard, a
// ValidatingAdmissionPolicy and its binding after the webhook
// configurations; the module gets no rights to them, and its webhooks skip
// the label only where the capability turned it on.
func TestRenderShipsOptOutGuards(t *testing.T) {
	m := sample()
	m.Capabilities = []spec.Capability{
		{Name: "policy"},
		{Name: "quota", OptOut: &spec.OptOut{Label: "vigil.dev/ignore", Allowed: []string{"alice", "group:admins"}}},
	}
	m.Bindings = append(m.Bindings, spec.Binding{Capability: "quota", Name: "limit", GVK: cm, Action: spec.Validate, Operations: []admissionv1.Operation{admissionv1.Create}, OptOut: "vigil.dev/ignore"})
	objs, err := Render(m, Options{Image: "example.com/uds-core:1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, o := range objs {
		switch v := o.(type) {
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			order = append(order, "webhooks "+v.Name)
		case *admissionregistrationv1.ValidatingAdmissionPolicy:
			if v.Name == spec.BindingGuardName(m.Name) {
				continue // the roles' own RoleBindings': TestRightsInTeamsNamespacesAreBoundByTheRoles
			}
			order = append(order, "policy "+v.Name)
			if v.Labels["app.kubernetes.io/name"] != "uds-core" {
				t.Errorf("policy labels %v", v.Labels)
			}
			if len(v.Spec.Validations) != 1 || !strings.Contains(v.Spec.Validations[0].Expression, `"alice"`) || !strings.Contains(v.Spec.Validations[0].Expression, `g in ["admins"]`) {
				t.Errorf("policy validations %+v: want alice and the group admins allowed", v.Spec.Validations)
			}
			if mc := v.Spec.MatchConstraints; mc.NamespaceSelector == nil || len(mc.NamespaceSelector.MatchExpressions)+len(mc.NamespaceSelector.MatchLabels) > 0 ||
				mc.ObjectSelector == nil || len(mc.ObjectSelector.MatchExpressions)+len(mc.ObjectSelector.MatchLabels) > 0 {
				t.Errorf("the guard selects namespaces or objects, so a label could switch it off: %+v", mc)
			}
			if *v.Spec.FailurePolicy != admissionregistrationv1.Fail {
				t.Errorf("guard failurePolicy %s", *v.Spec.FailurePolicy)
			}
		case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
			if v.Name == spec.BindingGuardName(m.Name) {
				continue
			}
			order = append(order, "binding "+v.Name+" of "+v.Spec.PolicyName)
		}
	}
	want := "[webhooks uds-core policy uds-core-quota-opt-out binding uds-core-quota-opt-out of uds-core-quota-opt-out]"
	if fmt.Sprint(order) != want {
		t.Errorf("objects %v, want %s", order, want)
	}
	for _, r := range Rules(m) {
		for _, res := range r.Resources {
			if strings.Contains(res, "admissionpolic") {
				t.Errorf("the module gets rights to its guards: %+v", r)
			}
		}
	}
}

// The provenance guard ships before the stamp it guards: a stamp is
// believed provenance.Settle after its creation, and by then its guard,
// created first, holds.
func TestProvenanceGuardShipsBeforeItsStamp(t *testing.T) {
	m := sample()
	m.Provenance = &spec.Provenance{}
	objs, err := Render(m, Options{Image: "example.com/uds-core:1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	guard, stamp := -1, -1
	for i, o := range objs {
		switch o.(type) {
		case *admissionregistrationv1.ValidatingAdmissionPolicy:
			if o.GetName() == registration.ProvenanceGuardName(m.Name) {
				guard = i
			}
		case *admissionregistrationv1.MutatingAdmissionPolicy:
			if o.GetName() == registration.ProvenanceStampName(m.Name) {
				stamp = i
			}
		}
	}
	if guard < 0 || stamp < 0 || guard > stamp {
		t.Errorf("the provenance guard is object %d and its stamp %d of %d: want both, the guard first", guard, stamp, len(objs))
	}
}

// The configurations registered when ready ship without a `webhooks` field,
// so applying the manifests again can never fight the registrar, which alone
// writes them. The fail-closed configurations are the exception: static,
// they carry their webhooks from install on.
func TestRegisteredWhenReadyConfigurationsShipNoWebhooksField(t *testing.T) {
	m := sample()
	m.Bindings = append(m.Bindings, spec.Binding{Capability: "strict", Name: "no-root", GVK: cm, Action: spec.Validate, Operations: []admissionv1.Operation{admissionv1.Create}, FailClosed: true})
	objs, err := Render(m, Options{Image: "example.com/uds-core:1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := YAML(objs)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, doc := range strings.Split(string(out), "\n---\n") {
		var u map[string]any
		if err := yaml.Unmarshal([]byte(doc), &u); err != nil {
			t.Fatal(err)
		}
		kind, _ := u["kind"].(string)
		if !strings.HasSuffix(kind, "WebhookConfiguration") {
			continue
		}
		name := u["metadata"].(map[string]any)["name"].(string)
		_, has := u["webhooks"]
		switch name {
		case "uds-core":
			if has {
				t.Errorf("%s %s ships a webhooks field: applying the manifests would fight the registrar", kind, name)
			}
		case "uds-core-fail-closed":
			if kind == "ValidatingWebhookConfiguration" && !has {
				t.Errorf("the fail-closed %s ships no webhooks", kind)
			}
		default:
			t.Errorf("unexpected %s %s", kind, name)
		}
		seen[kind+" "+name] = true
	}
	if len(seen) != 3 {
		t.Errorf("webhook configurations %v: want the module's two and the fail-closed validating one", seen)
	}
}

// Every container's GOMEMLIMIT is 90% of its memory limit, in bytes, as Go
// reads it; the admission container serves /metrics on its own port, and a
// Service exposes it.
func TestMemoryLimitAndMetricsPort(t *testing.T) {
	objs, err := Render(sample(), Options{Image: "example.com/uds-core:1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	var metricsService bool
	for _, o := range objs {
		switch v := o.(type) {
		case *corev1.Service:
			if v.Name == "uds-core-metrics" && v.Spec.Selector["app.kubernetes.io/component"] == "admission" && v.Spec.Ports[0].TargetPort.String() == "metrics" {
				metricsService = true
			}
		case *appsv1.Deployment:
			for _, c := range append(v.Spec.Template.Spec.InitContainers, v.Spec.Template.Spec.Containers...) {
				limit := c.Resources.Limits.Memory().Value()
				var got string
				for _, e := range c.Env {
					if e.Name == "GOMEMLIMIT" {
						got = e.Value
					}
				}
				if want := fmt.Sprint(limit / 10 * 9); limit == 0 || got != want {
					t.Errorf("%s/%s: GOMEMLIMIT %q, want %s (90%% of its limit of %d bytes)", v.Name, c.Name, got, want, limit)
				}
				if c.Name != "admission" {
					continue
				}
				if limit != 256<<20 {
					t.Errorf("the admission container's memory limit is %d, the abuse test holds it to 256Mi", limit)
				}
				args := strings.Join(c.Args, " ")
				if !strings.Contains(args, "--metrics-addr :8080") {
					t.Errorf("admission args %q: no --metrics-addr :8080", args)
				}
				var port bool
				for _, p := range c.Ports {
					port = port || (p.Name == "metrics" && p.ContainerPort == 8080)
				}
				if !port {
					t.Errorf("admission ports %+v: no metrics port", c.Ports)
				}
			}
		}
	}
	if !metricsService {
		t.Error("no Service exposes the admission role's metrics")
	}
}

// Options' memory limits replace the defaults, GOMEMLIMIT following each;
// a limit no container runs under is refused, naming the flag, what a
// limit must be and an example.
func TestMemoryLimits(t *testing.T) {
	objs, err := Render(sample(), Options{Image: "example.com/uds-core:1.2.3", AdmissionMemory: "384Mi", WatcherMemory: "1Gi"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, o := range objs {
		if d, ok := o.(*appsv1.Deployment); ok {
			for _, c := range d.Spec.Template.Spec.Containers {
				got[c.Name] = c.Resources.Limits.Memory().String()
				for _, e := range c.Env {
					if e.Name == "GOMEMLIMIT" && e.Value != fmt.Sprint(c.Resources.Limits.Memory().Value()/10*9) {
						t.Errorf("%s: GOMEMLIMIT %s for a limit of %s", c.Name, e.Value, got[c.Name])
					}
				}
			}
		}
	}
	if got["admission"] != "384Mi" || got["watcher"] != "1Gi" {
		t.Errorf("memory limits %v, want admission 384Mi and watcher 1Gi", got)
	}
	for _, o := range []Options{{WatcherMemory: "10Mi"}, {AdmissionMemory: "lots"}} {
		o.Image = "example.com/uds-core:1.2.3"
		_, err := Render(sample(), o)
		if err == nil || !strings.Contains(err.Error(), "-memory-limit") || !strings.Contains(err.Error(), "expected a memory quantity of at least 64Mi (the container's request), such as 512Mi") {
			t.Errorf("Render with %+v: %v; want the flag named and what a limit must be", o, err)
		}
	}
}

// The watcher may get and patch the module's two webhook configurations, and
// dry-run the canary, only when a capability declares an outage bound; a
// module with such a capability and no watches still gets a watcher.
func TestWatcherFailsOpenOnlyWithTheOptIn(t *testing.T) {
	webhookRights := func(m *spec.Module) (configs, canary bool) {
		for _, r := range Rules(m) {
			if r.Role != Watcher {
				continue
			}
			for _, res := range r.Resources {
				if strings.Contains(res, "webhookconfigurations") {
					// The audit reads the validating configuration's record
					// (get); failing open patches both.
					configs = configs || slices.Contains(r.Verbs, "patch")
					for _, v := range r.Verbs {
						if v != "get" && v != "patch" {
							t.Errorf("the watcher's rule on %s: %+v; want get or patch only", res, r.PolicyRule)
						}
					}
					if strings.Join(r.ResourceNames, ",") != m.Name {
						t.Errorf("the watcher's rule on %s: %+v; want it on %s only", res, r.PolicyRule, m.Name)
					}
				}
				if res == "configmaps" && strings.Join(r.Verbs, ",") == "create" {
					canary = true
					if r.Namespace != m.Namespace {
						t.Errorf("the watcher's canary rule in %q; want the module's namespace", r.Namespace)
					}
				}
			}
		}
		return configs, canary
	}
	m := sample()
	if configs, canary := webhookRights(m); configs || canary {
		t.Fatalf("without FailOpenAfter the watcher may patch the webhook configurations (%v) or dry-run the canary (%v)", configs, canary)
	}
	m.Watches, m.Schedules = nil, nil
	m.Bindings[0].FailOpenAfter = time.Minute
	if configs, canary := webhookRights(m); !configs || !canary {
		t.Fatalf("with FailOpenAfter the watcher lacks get/patch on the configurations (%v) or the canary (%v)", configs, canary)
	}
	objs, err := Render(m, Options{Image: "example.com/uds-core:1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, o := range objs {
		if d, ok := o.(*appsv1.Deployment); ok && d.Name == m.Name+"-watcher" {
			found = true
		}
	}
	if !found {
		t.Fatal("a module whose capability fails open after a bound has no watcher Deployment")
	}
}

// A role whose informers read a kind a CRD serves may watch CRDs, to wait
// for that kind instead of exiting, and record Events saying so: the
// admission and watcher roles for a Lister's kind, the watcher alone for a
// watch's; none for built-in kinds.
func TestRolesThatReadACRDKindMayWaitForIt(t *testing.T) {
	exemption := schema.GroupVersionKind{Group: "uds.dev", Version: "v1alpha1", Kind: "Exemption"}
	widget := schema.GroupVersionKind{Group: "late.vigil.dev", Version: "v1", Kind: "Widget"}
	crdWatch := func(m *spec.Module) map[string]string {
		out := map[string]string{}
		for _, r := range Rules(m) {
			if r.Resources[0] == "customresourcedefinitions" && r.Namespace == "" && strings.Contains(r.Why, "waits for the CRDs of") {
				if got := strings.Join(r.Verbs, ","); got != "list,watch" {
					t.Errorf("the %s role's CRD rule has verbs %s, want list,watch", r.Role, got)
				}
				out[r.Role] = r.Why
			}
		}
		return out
	}
	m := sample()
	if got := crdWatch(m); len(got) != 0 {
		t.Errorf("built-in kinds only: CRD rules %v, want none", got)
	}
	m.Listers = []spec.Lister{{GVK: exemption, Select: spec.Selection{Namespaces: []string{"uds-policy-exemptions"}}}}
	m.Watches = append(m.Watches, spec.Watch{Capability: "policy", Name: "widgets", Role: spec.RoleReconcile, GVK: widget, Site: "main.go:4"})
	got := crdWatch(m)
	if !strings.Contains(got[Admission], "Exemption") || strings.Contains(got[Admission], "Widget") {
		t.Errorf("admission's CRD rule: %q, want it for the Lister's Exemption only", got[Admission])
	}
	if !strings.Contains(got[Watcher], "Exemption, Widget") {
		t.Errorf("watcher's CRD rule: %q, want it for Exemption and Widget", got[Watcher])
	}
}

// A role's rights in a namespace other than the module's ship as a
// ClusterRole of that namespace, never as a Role there (the namespace may
// come after the module); the role may bind exactly those ClusterRoles,
// read exactly those namespaces, and the binding guard ships with them.
func TestRightsInTeamsNamespacesAreBoundByTheRoles(t *testing.T) {
	m := sample()
	objs, err := Render(m, Options{Image: "example.com/uds-core:1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	clusterRoles := map[string]*rbacv1.ClusterRole{}
	guard := false
	for _, o := range objs {
		switch v := o.(type) {
		case *rbacv1.Role:
			if v.Namespace != m.Namespace {
				t.Errorf("Role %s/%s: a Role outside the module's namespace cannot install before that namespace exists", v.Namespace, v.Name)
			}
		case *rbacv1.RoleBinding:
			if v.Namespace != m.Namespace {
				t.Errorf("RoleBinding %s/%s ships: the role binds its rights there itself", v.Namespace, v.Name)
			}
		case *rbacv1.ClusterRole:
			clusterRoles[v.Name] = v
		case *admissionregistrationv1.ValidatingAdmissionPolicy:
			guard = guard || v.Name == spec.BindingGuardName(m.Name)
		}
	}
	rules := Rules(m)
	bound := 0
	for _, role := range Roles(m) {
		sa := ServiceAccount(m.Name, role)
		namespaces := BoundNamespaces(m.Namespace, role, rules)
		for _, ns := range namespaces {
			bound++
			if clusterRoles[spec.NamespaceRoleName(sa, ns)] == nil {
				t.Errorf("no ClusterRole %s holds %s's rights in %s", spec.NamespaceRoleName(sa, ns), sa, ns)
			}
		}
		if len(namespaces) == 0 {
			continue
		}
		own := clusterRoles[spec.BindingName(sa)]
		if own == nil {
			t.Fatalf("no ClusterRole %s", spec.BindingName(sa))
		}
		for _, r := range own.Rules {
			switch {
			case slices.Contains(r.Verbs, "bind"):
				if len(r.ResourceNames) != len(namespaces) || !strings.HasPrefix(r.ResourceNames[0], spec.NamespaceRoleName(sa, "")) {
					t.Errorf("%s may bind %v; want its %d namespaces' ClusterRoles only", sa, r.ResourceNames, len(namespaces))
				}
			case slices.Contains(r.Resources, "namespaces"):
				if !slices.Equal(r.ResourceNames, namespaces) {
					t.Errorf("%s reads namespaces %v; want %v only", sa, r.ResourceNames, namespaces)
				}
			}
		}
	}
	if bound == 0 {
		t.Fatal("the sample has no rights outside the module's namespace: the test tests nothing")
	}
	if !guard {
		t.Errorf("no %s guard ships with roles that create RoleBindings", spec.BindingGuardName(m.Name))
	}
}
