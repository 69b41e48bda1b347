package manifests

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/vigilkit/vigil/internal/registration"
	"github.com/vigilkit/vigil/internal/spec"
	"github.com/vigilkit/vigil/store/v1alpha1"
)

var (
	read      = []string{"get", "list", "watch"}
	crdGroup  = "apiextensions.k8s.io"
	crdPlural = "customresourcedefinitions"
)

// Resource is the plural resource of a kind, as RBAC and webhooks name it.
func Resource(gvk schema.GroupVersionKind) string {
	plural, _ := meta.UnsafeGuessKindToResource(gvk)
	return plural.Resource
}

// Rules derives every RBAC rule the module needs, each with why. Rules
// narrow to namespaces and, where the code reads one object by a name field
// selector, to resourceNames; nothing is a wildcard.
func Rules(m *spec.Module) []spec.Rule {
	var out []spec.Rule
	// role is the ServiceAccount the rules being added are for; both, for
	// what the two roles' pods share.
	role := ""
	add := func(ns, group, resource string, names []string, why string, verbs ...string) {
		out = append(out, spec.Rule{Role: role, Namespace: ns, Why: why, PolicyRule: rbacv1.PolicyRule{
			APIGroups: []string{group}, Resources: []string{resource}, Verbs: verbs, ResourceNames: names,
		}})
	}
	names := func(n string) []string {
		if n == "" {
			return nil
		}
		return []string{n}
	}
	podEvents := false
	role = Admission
	for _, g := range m.Gates() {
		if g.Waits == nil {
			continue
		}
		why := fmt.Sprintf("gate %s (phase %d, %s) waits for it", g.Name, g.Phase, g.Site)
		gvk := g.Waits.GVK()
		add(g.Waits.Namespace, gvk.Group, Resource(gvk), names(g.Waits.Name), why, read...)
		if isCustom(gvk.Group) {
			add("", crdGroup, crdPlural, nil, fmt.Sprintf("gate %s (%s) waits for the CRD of %s when it is not installed yet", g.Name, g.Site, gvk.Kind), "list", "watch")
		}
		podEvents = true
	}
	if podEvents {
		add(m.Namespace, "", "events", nil, "gates record their progress as Events on their Pod", "create", "patch")
	}
	for _, role = range Roles(m) {
		why := "the module's Store (admission, gate callbacks and handlers)"
		add(m.Namespace, v1alpha1.GroupVersion.Group, "stores", []string{m.Name}, why, "get", "list", "watch", "update")
		add(m.Namespace, v1alpha1.GroupVersion.Group, "stores", nil, why+": created on first write", "create")
		for _, l := range m.Listers {
			gvk := l.GVK
			why := fmt.Sprintf("a Lister of %s keeps every object of the kind in a read cache", gvk.Kind)
			if len(l.Select.Namespaces) > 0 {
				why = fmt.Sprintf("a Lister of %s keeps the objects of the kind in its namespaces in a read cache", gvk.Kind)
			}
			for _, ns := range orAll(l.Select.Namespaces) {
				add(ns, gvk.Group, Resource(gvk), nil, why, read...)
			}
		}
		for _, r := range m.Rules {
			if r.Role != "" && r.Role != role {
				continue // the author gave it to another role's pods
			}
			r.Role = role
			out = append(out, r)
		}
	}
	role = Admission
	if len(m.Bindings) > 0 {
		reg := registration.Rule(m.Name)
		out = append(out, spec.Rule{Role: role, PolicyRule: reg, Why: "registration when ready: fill the module's two webhook configurations, and nothing else"})
		for _, b := range m.Bindings {
			if b.FailClosed {
				out = append(out, spec.Rule{Role: role, PolicyRule: registration.StaticRule(m.Name), Why: "fail-closed capabilities: keep the serving CA in their static webhook configurations"})
				break
			}
		}
		out = append(out, spec.Rule{Role: role, Namespace: m.Namespace, PolicyRule: registration.CanaryRule(), Why: "registration's reachability canary (dry run only: nothing is written)"})
		add(m.Namespace, "", "secrets", []string{CertSecret(m.Name)}, "the serving certificate, shared by the replicas and renewed before expiry", "get", "update")
		add(m.Namespace, "", "secrets", nil, "the serving certificate: created by the first replica", "create")
		add(m.Namespace, "", "events", nil, "registration problems are reported as Events on the module's Pods", "create", "patch")
		for _, l := range registration.LeaseRules(m.Name, m.Version) {
			why := "this version's admission Lease, which tells an older version whether it still runs (a rollback takes the registration over once it lapses)"
			if len(l.ResourceNames) == 0 && l.Verbs[0] == "get" {
				why += ": read any version's (an older one cannot know a newer one's name)"
			}
			out = append(out, spec.Rule{Role: role, Namespace: m.Namespace, PolicyRule: l, Why: why})
		}
	}
	role = Watcher
	if m.Audited() {
		out = append(out, spec.Rule{Role: role, PolicyRule: rbacv1.PolicyRule{
			APIGroups: []string{admissionregistrationv1.GroupName}, Resources: []string{"validatingwebhookconfigurations"},
			Verbs: []string{"get"}, ResourceNames: []string{m.Name},
		}, Why: "the audit reads since when the webhooks enforce from their registration record"})
		kinds := m.AuditedKinds()
		for _, b := range m.Bindings { // in the order declared
			namespaces, ok := kinds[b.GVK]
			if !ok {
				continue
			}
			delete(kinds, b.GVK)
			why := fmt.Sprintf("the audit runs the validations of %s over the objects that exist", b.GVK.Kind)
			for _, ns := range orAll(namespaces) {
				add(ns, b.GVK.Group, Resource(b.GVK), nil, why, "list")
				add(ns, "", "events", nil, why+" and reports violations as Events on them", "create")
			}
		}
		if m.AuditsMutations() {
			out = append(out, spec.Rule{Role: role, PolicyRule: rbacv1.PolicyRule{
				APIGroups: []string{admissionregistrationv1.GroupName}, Resources: []string{"mutatingwebhookconfigurations"},
				Verbs: []string{"get"}, ResourceNames: []string{m.Name},
			}, Why: "the audit reads when the mutations were failed open from their registration record"})
		}
		report := "the audit keeps its findings as PolicyReports (wgpolicyk8s.io), when the cluster serves them"
		// Only the module's own report, by name: other tools' PolicyReports
		// in the same namespaces are not the watcher's to read or rewrite.
		// list too is narrowed by the name: the audit finds its reports of
		// namespaces without findings now with a metadata.name field
		// selector, which RBAC matches against resourceNames. create cannot
		// be: the API server authorizes it before the object, and so its
		// name, exists. That is the one right left on other names, and it
		// creates only: a report another tool has written stays its own.
		own := []string{spec.PolicyReportName(m.Name)}
		for _, ns := range m.ReportNamespaces() {
			add(ns, spec.PolicyReports.Group, spec.PolicyReports.Resource, own, report+": the module's own, "+own[0], "get", "list", "update", "delete")
			add(ns, spec.PolicyReports.Group, spec.PolicyReports.Resource, nil, report+": created in a namespace with findings (create cannot be narrowed to a name)", "create")
		}
		add("", spec.ClusterPolicyReports.Group, spec.ClusterPolicyReports.Resource, []string{spec.PolicyReportName(m.Name)}, report+": cluster-scoped objects'", "get", "update", "delete")
		add("", spec.ClusterPolicyReports.Group, spec.ClusterPolicyReports.Resource, nil, report+": cluster-scoped objects'", "create")
	}
	if m.HasWatcher() {
		lease := spec.WatcherLeaseName(m.Name)
		add(m.Namespace, "coordination.k8s.io", "leases", []string{lease}, "leader election among the watcher's replicas", "get", "update")
		add(m.Namespace, "coordination.k8s.io", "leases", nil, "leader election: the first replica creates the Lease", "create")
		add(m.Namespace, "", "events", nil, "leader election records changes of leader as Events", "create", "patch")
	}
	if m.FailsOpen() {
		out = append(out, spec.Rule{Role: role, PolicyRule: registration.Rule(m.Name), Why: "capabilities with FailOpenAfter: fail their webhooks open after an outage of every admission replica lasting the bound"})
		out = append(out, spec.Rule{Role: role, Namespace: m.Namespace, PolicyRule: registration.CanaryRule(), Why: "outage checks: the registration canary, dry run only, tells whether an admission replica serves"})
	}
	// The shared informer of a type selects one object by name only when
	// every user of the type names it; then RBAC can name it too.
	var users []spec.Lister
	for _, w := range m.Watches {
		users = append(users, spec.Lister{GVK: w.GVK, Select: spec.Selection{Namespaces: w.Select.Namespaces, Name: w.Select.Name}})
	}
	for _, l := range m.Listers {
		users = append(users, spec.Lister{GVK: l.GVK, Select: spec.Selection{Namespaces: l.Select.Namespaces}})
	}
	informerName := map[schema.GroupVersionKind]string{}
	for _, a := range spec.Agree(users) {
		informerName[a.GVK] = a.Name
	}
	for _, w := range m.Watches {
		why := fmt.Sprintf("%s %s (%s) watches it through the shared informer", w.Role, w.ID(), w.Site)
		for _, ns := range orAll(w.Select.Namespaces) {
			add(ns, w.GVK.Group, Resource(w.GVK), names(informerName[w.GVK]), why, read...)
			if w.Role == spec.RoleFinalize {
				add(ns, w.GVK.Group, Resource(w.GVK), nil, fmt.Sprintf("finalize %s (%s) adds and removes its finalizer", w.ID(), w.Site), "patch")
			}
		}
	}
	return out
}

// The module's two kinds of pod, each with its own ServiceAccount.
const (
	// Admission is the admission pod: its gate init containers and the
	// admission container.
	Admission = "admission"
	// Watcher is the watcher pod.
	Watcher = "watcher"
)

// Roles are the kinds of pod the module runs.
func Roles(m *spec.Module) []string {
	var out []string
	if m.HasAdmission() {
		out = append(out, Admission)
	}
	if m.HasWatcher() {
		out = append(out, Watcher)
	}
	return out
}

// ServiceAccount is the ServiceAccount of one kind of the module's pods.
func ServiceAccount(module, role string) string {
	if role == Watcher {
		return module + "-watcher"
	}
	return module
}

// CertSecret is the Secret that holds a module's CA and serving certificate.
func CertSecret(module string) string { return module + "-tls" }

func orAll(namespaces []string) []string {
	if len(namespaces) == 0 {
		return []string{""}
	}
	out := slices.Clone(namespaces)
	slices.Sort(out)
	return slices.Compact(out)
}

// isCustom reports whether a group is one only a CRD can add: groups with a
// dot that Kubernetes does not serve itself.
func isCustom(group string) bool {
	return strings.Contains(group, ".") && !strings.HasSuffix(group, ".k8s.io") && group != "apiextensions.k8s.io"
}

// Merged is the rules of one role and namespace (empty: cluster-wide)
// merged per API group, resource and resource names, verbs united and
// sorted.
type Merged struct {
	Role      string
	Namespace string
	Rules     []rbacv1.PolicyRule
}

// Merge folds rules into one list per namespace, deterministic.
func Merge(rules []spec.Rule) []Merged {
	type key struct{ role, ns, group, resource, names string }
	verbs := map[key][]string{}
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				names := slices.Clone(r.ResourceNames)
				slices.Sort(names)
				k := key{r.Role, r.Namespace, g, res, strings.Join(names, ",")}
				verbs[k] = append(verbs[k], r.Verbs...)
			}
		}
	}
	keys := make([]key, 0, len(verbs))
	for k := range verbs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.role != b.role {
			return a.role < b.role
		}
		if a.ns != b.ns {
			return a.ns < b.ns
		}
		if a.group != b.group {
			return a.group < b.group
		}
		if a.resource != b.resource {
			return a.resource < b.resource
		}
		return a.names < b.names
	})
	var out []Merged
	for _, k := range keys {
		if len(out) == 0 || out[len(out)-1].Namespace != k.ns || out[len(out)-1].Role != k.role {
			out = append(out, Merged{Role: k.role, Namespace: k.ns})
		}
		v := slices.Clone(verbs[k])
		slices.Sort(v)
		v = slices.Compact(v)
		pr := rbacv1.PolicyRule{APIGroups: []string{k.group}, Resources: []string{k.resource}, Verbs: v}
		if k.names != "" {
			pr.ResourceNames = strings.Split(k.names, ",")
		}
		out[len(out)-1].Rules = append(out[len(out)-1].Rules, pr)
	}
	return out
}

// Wildcards reports every wildcard a rule holds, for the check that none does.
func Wildcards(rules []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rules {
		for _, list := range [][]string{r.APIGroups, r.Resources, r.Verbs, r.ResourceNames} {
			for _, v := range list {
				if v == "*" || strings.Contains(v, "*") {
					out = append(out, fmt.Sprintf("%v", r))
				}
			}
		}
	}
	return out
}
