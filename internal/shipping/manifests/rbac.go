package manifests

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/vigilkit/vigil/internal/definition/scheme"
	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/serving/registration"
	"github.com/vigilkit/vigil/store/v1alpha1"
)

var (
	read      = []string{"get", "list", "watch"}
	crdGroup  = "apiextensions.k8s.io"
	crdPlural = "customresourcedefinitions"
)

// Rules derives every RBAC rule the module needs, each with why. Rules
// narrow to namespaces and, where the code reads one object by a name field
// selector, to resourceNames; nothing is a wildcard.
func Rules(m *spec.Module) []spec.Rule {
	rs := &ruleSet{role: Admission}
	rs.gates(m)
	rs.stores(m)
	rs.role = Admission
	if len(m.Bindings) > 0 {
		rs.registration(m)
	}
	rs.role = Watcher
	if m.Audited() {
		rs.audit(m)
	}
	rs.watcher(m)
	rs.watches(m)
	rs.served(m)
	rs.binds(m)
	return rs.out
}

// binds: the rights a role holds in namespaces other than the module's
// ship as one ClusterRole per namespace (spec.NamespaceRoleName), which the
// role binds there itself once the namespace exists, so that the module can
// be installed before the namespaces it governs. To do so it may read those
// namespaces, bind those ClusterRoles only, create RoleBindings, and read
// and delete those by its binding's name (rolebind.Binder mends one a
// namespace's admin made under that name first); the
// module's binding guard (registration.BindingGuard) lets its ServiceAccounts
// create no other RoleBinding than its own, of its own namespace's
// ClusterRole, to itself.
func (rs *ruleSet) binds(m *spec.Module) {
	for _, role := range Roles(m) {
		namespaces := BoundNamespaces(m.Namespace, role, rs.out)
		if len(namespaces) == 0 {
			continue
		}
		rs.role = role
		sa := ServiceAccount(m.Name, role)
		var roles []string
		for _, ns := range namespaces {
			roles = append(roles, spec.NamespaceRoleName(sa, ns))
		}
		why := fmt.Sprintf("its rights in %s ship as ClusterRoles, bound by the role in each namespace once it exists (the module installs before them)", strings.Join(namespaces, ", "))
		rs.add("", "", "namespaces", namespaces, why+": whether it exists yet", "get")
		rs.add("", rbacv1.GroupName, "clusterroles", roles, why+": the ClusterRoles it binds, and no other", "get", "bind")
		rs.add("", rbacv1.GroupName, "rolebindings", nil, why+": its RoleBinding there (create cannot be narrowed to a namespace that does not exist; the module's binding guard refuses any other)", "create")
		rs.add("", rbacv1.GroupName, "rolebindings", []string{spec.BindingName(sa)}, why+": its own RoleBinding, by name, to replace one someone else made under that name", "get", "delete")
	}
}

// BoundNamespaces are the namespaces other than the module's own (ns) in
// which the role has rules, sorted: those it binds itself.
func BoundNamespaces(ns, role string, rules []spec.Rule) []string {
	var out []string
	for _, r := range rules {
		if r.Role == role && r.Namespace != "" && r.Namespace != ns && !slices.Contains(out, r.Namespace) {
			out = append(out, r.Namespace)
		}
	}
	slices.Sort(out)
	return out
}

// served: the CRDs of the kinds a role's informers read that a CRD serves,
// which the role watches while the API server does not serve them yet (it
// waits for them instead of exiting), and the Events that say so.
func (rs *ruleSet) served(m *spec.Module) {
	kinds := map[string][]schema.GroupVersionKind{}
	add := func(role string, gvk schema.GroupVersionKind) {
		if !scheme.BuiltIn(gvk) && !slices.Contains(kinds[role], gvk) {
			kinds[role] = append(kinds[role], gvk)
		}
	}
	for _, role := range Roles(m) {
		for _, l := range m.Listers {
			add(role, l.GVK)
		}
	}
	if m.HasWatcher() {
		for _, w := range m.Watches {
			add(Watcher, w.GVK)
		}
	}
	for _, role := range Roles(m) {
		if len(kinds[role]) == 0 {
			continue
		}
		rs.role = role
		var names []string
		for _, k := range kinds[role] {
			names = append(names, k.Kind)
		}
		why := fmt.Sprintf("the %s role waits for the CRDs of %s when they are not installed yet", role, strings.Join(names, ", "))
		rs.add("", crdGroup, crdPlural, nil, why, "list", "watch")
		rs.add(m.Namespace, "", "events", nil, why+", and says so in Events on its Pod", "create", "patch")
	}
}

// ruleSet collects the rules of Rules, in order; role is the ServiceAccount
// the rules being added are for.
type ruleSet struct {
	out  []spec.Rule
	role string
}

// add adds a rule for role in namespace ns ("" for a cluster-wide one) on
// the resource, to the objects of these names (nil for all).
func (rs *ruleSet) add(ns, group, resource string, names []string, why string, verbs ...string) {
	rs.out = append(rs.out, spec.Rule{Role: rs.role, Namespace: ns, Why: why, PolicyRule: rbacv1.PolicyRule{
		APIGroups: []string{group}, Resources: []string{resource}, Verbs: verbs, ResourceNames: names,
	}})
}

// nameOrAll is the resourceNames of a rule on the object named n; nil, for
// all, when n is "".
func nameOrAll(n string) []string {
	if n == "" {
		return nil
	}
	return []string{n}
}

// gates: what the gates wait for, and the Events they record on their Pod.
func (rs *ruleSet) gates(m *spec.Module) {
	podEvents := false
	for _, g := range m.Gates() {
		if g.Waits == nil {
			continue
		}
		why := fmt.Sprintf("gate %s (phase %d, %s) waits for it", g.Name, g.Phase, g.Site)
		gvk := g.Waits.GVK()
		rs.add(g.Waits.Namespace, gvk.Group, m.ResourceOf(gvk), nameOrAll(g.Waits.Name), why, read...)
		if isCustom(gvk.Group) {
			rs.add("", crdGroup, crdPlural, nil, fmt.Sprintf("gate %s (%s) waits for the CRD of %s when it is not installed yet", g.Name, g.Site, gvk.Kind), "list", "watch")
		}
		podEvents = true
	}
	if podEvents {
		rs.add(m.Namespace, "", "events", nil, "gates record their progress as Events on their Pod", "create", "patch")
	}
}

// stores: the module's Store, its Listers and the author's own rules, for
// each role's pods.
func (rs *ruleSet) stores(m *spec.Module) {
	for _, role := range Roles(m) {
		rs.role = role
		why := "the module's Store (admission, gate callbacks and handlers)"
		rs.add(m.Namespace, v1alpha1.GroupVersion.Group, "stores", []string{m.Name}, why, "get", "list", "watch", "update")
		rs.add(m.Namespace, v1alpha1.GroupVersion.Group, "stores", nil, why+": created on first write", "create")
		for _, l := range m.Listers {
			gvk := l.GVK
			why := fmt.Sprintf("a Lister of %s keeps every object of the kind in a read cache", gvk.Kind)
			if len(l.Select.Namespaces) > 0 {
				why = fmt.Sprintf("a Lister of %s keeps the objects of the kind in its namespaces in a read cache", gvk.Kind)
			}
			for _, ns := range orAll(l.Select.Namespaces) {
				rs.add(ns, gvk.Group, m.ResourceOf(gvk), nil, why, read...)
			}
		}
		for _, r := range m.Rules {
			if r.Role != "" && r.Role != role {
				continue // the author gave it to another role's pods
			}
			r.Role = role
			rs.out = append(rs.out, r)
		}
	}
}

// registration: the admission role's webhook configurations, canary,
// serving certificate and Lease.
func (rs *ruleSet) registration(m *spec.Module) {
	reg := registration.Rule(m.Name)
	rs.out = append(rs.out, spec.Rule{Role: rs.role, PolicyRule: reg, Why: "registration when ready: fill the module's two webhook configurations, and nothing else"})
	for _, b := range m.Bindings {
		if b.FailClosed {
			rs.out = append(rs.out, spec.Rule{Role: rs.role, PolicyRule: registration.StaticRule(m.Name), Why: "fail-closed capabilities: keep the serving CA in their static webhook configurations"})
			break
		}
	}
	rs.out = append(rs.out, spec.Rule{Role: rs.role, Namespace: m.Namespace, PolicyRule: registration.CanaryRule(), Why: "registration's reachability canary (dry run only: nothing is written)"})
	rs.add(m.Namespace, "", "secrets", []string{CertSecret(m.Name)}, "the serving certificate, shared by the replicas and renewed before expiry", "get", "update")
	rs.add(m.Namespace, "", "secrets", nil, "the serving certificate: created by the first replica", "create")
	rs.add(m.Namespace, "", "events", nil, "registration problems are reported as Events on the module's Pods", "create", "patch")
	for _, l := range registration.LeaseRules(m.Name, m.Version) {
		why := "this version's admission Lease, which tells an older version whether it still runs (a rollback takes the registration over once it lapses)"
		if len(l.ResourceNames) == 0 && l.Verbs[0] == "get" {
			why += ": read any version's (an older one cannot know a newer one's name)"
		}
		rs.out = append(rs.out, spec.Rule{Role: rs.role, Namespace: m.Namespace, PolicyRule: l, Why: why})
	}
}

// audit: what the watcher's audit reads, reports on and keeps its findings
// in.
func (rs *ruleSet) audit(m *spec.Module) {
	rs.out = append(rs.out, spec.Rule{Role: rs.role, PolicyRule: rbacv1.PolicyRule{
		APIGroups: []string{admissionregistrationv1.GroupName}, Resources: []string{"validatingwebhookconfigurations"},
		Verbs: []string{"get"}, ResourceNames: []string{m.Name},
	}, Why: "the audit reads since when the webhooks enforce from their registration record"})
	for _, c := range m.Capabilities {
		if c.OptOut != nil || c.OptIn != nil {
			rs.add("", "", "namespaces", nil, "the audit reads namespaces' opt-out and opt-in labels: what a capability's webhooks leave out is no violation of it", "get")
			break
		}
	}
	kinds := m.AuditedKinds()
	for _, b := range m.Bindings { // in the order declared
		namespaces, ok := kinds[b.GVK]
		if !ok {
			continue
		}
		delete(kinds, b.GVK)
		why := fmt.Sprintf("the audit runs the validations of %s over the objects that exist", b.GVK.Kind)
		for _, ns := range orAll(namespaces) {
			rs.add(ns, b.GVK.Group, m.ResourceOf(b.GVK), nil, why, "list", "watch") // watch: a list streamed (see internal/serving/audit)
			rs.add(ns, "", "events", nil, why+" and reports violations as Events on them", "create")
		}
	}
	if m.AuditsMutations() {
		rs.out = append(rs.out, spec.Rule{Role: rs.role, PolicyRule: rbacv1.PolicyRule{
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
		rs.add(ns, spec.PolicyReports.Group, spec.PolicyReports.Resource, own, report+": the module's own, "+own[0], "get", "list", "update", "delete")
		rs.add(ns, spec.PolicyReports.Group, spec.PolicyReports.Resource, nil, report+": created in a namespace with findings (create cannot be narrowed to a name)", "create")
	}
	rs.add("", spec.ClusterPolicyReports.Group, spec.ClusterPolicyReports.Resource, []string{spec.PolicyReportName(m.Name)}, report+": cluster-scoped objects'", "get", "update", "delete")
	rs.add("", spec.ClusterPolicyReports.Group, spec.ClusterPolicyReports.Resource, nil, report+": cluster-scoped objects'", "create")
}

// watcher: the watcher's leader election, and failing webhooks open after
// an outage.
func (rs *ruleSet) watcher(m *spec.Module) {
	if m.HasWatcher() {
		lease := spec.WatcherLeaseName(m.Name)
		rs.add(m.Namespace, "coordination.k8s.io", "leases", []string{lease}, "leader election among the watcher's replicas", "get", "update")
		rs.add(m.Namespace, "coordination.k8s.io", "leases", nil, "leader election: the first replica creates the Lease", "create")
		rs.add(m.Namespace, "", "events", nil, "leader election records changes of leader as Events", "create", "patch")
	}
	if m.FailsOpen() {
		rs.out = append(rs.out, spec.Rule{Role: rs.role, PolicyRule: registration.Rule(m.Name), Why: "capabilities with FailOpenAfter: fail their webhooks open after an outage of every admission replica lasting the bound"})
		rs.out = append(rs.out, spec.Rule{Role: rs.role, Namespace: m.Namespace, PolicyRule: registration.CanaryRule(), Why: "outage checks: the registration canary, dry run only, tells whether an admission replica serves"})
	}
}

// watches: what the watches read through the shared informers, and the
// finalizers they add and remove.
func (rs *ruleSet) watches(m *spec.Module) {
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
			rs.add(ns, w.GVK.Group, m.ResourceOf(w.GVK), nameOrAll(informerName[w.GVK]), why, read...)
			if w.Role == spec.RoleFinalize {
				rs.add(ns, w.GVK.Group, m.ResourceOf(w.GVK), nil, fmt.Sprintf("finalize %s (%s) adds and removes its finalizer", w.ID(), w.Site), "patch")
			}
		}
	}
}

// The module's two kinds of pod, each with its own ServiceAccount.
const (
	// Admission is the admission pod: its gate init containers and the
	// admission container.
	Admission = spec.PodAdmission
	// Watcher is the watcher pod.
	Watcher = spec.PodWatcher
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
func ServiceAccount(module, role string) string { return spec.ServiceAccount(module, role) }

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
