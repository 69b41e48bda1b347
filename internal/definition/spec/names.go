package spec

import (
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The names vigil derives from a module's definition, beside the webhook and
// policy names of webhooknames.go and PolicyName: the roles that make these
// objects and the tools that render their RBAC and charts read them here, so
// the two never disagree.

// FinalizerPrefix begins every finalizer a module's Finalize bindings own.
func FinalizerPrefix(module string) string { return module + ".vigil.dev/" }

// Finalizer is the finalizer of a module's Finalize binding.
func Finalizer(module, capability, binding string) string {
	name := capability + "." + binding
	if len(name) > 63 {
		name = name[:63]
	}
	return FinalizerPrefix(module) + strings.TrimRight(name, ".-_")
}

// WatcherLeaseName is the leader-election Lease of a module's watchers.
func WatcherLeaseName(module string) string { return module + "-watcher" }

// LabelSelector is the canonical text of label requirements: key=value, or
// key alone for "has the label", sorted.
func LabelSelector(reqs map[string]*string) string {
	parts := make([]string, 0, len(reqs))
	for k, v := range reqs {
		if v == nil {
			parts = append(parts, k)
		} else {
			parts = append(parts, k+"="+*v)
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// PolicyReports are written by the audit, when the cluster serves them, in
// the format of the Kubernetes Policy working group (wgpolicyk8s.io/v1alpha2),
// which Kyverno, policy-reporter and others read: one PolicyReport per
// namespace with findings, one ClusterPolicyReport for cluster-scoped
// objects, each named PolicyReportName(module).
var (
	PolicyReports        = schema.GroupVersionResource{Group: "wgpolicyk8s.io", Version: "v1alpha2", Resource: "policyreports"}
	ClusterPolicyReports = schema.GroupVersionResource{Group: "wgpolicyk8s.io", Version: "v1alpha2", Resource: "clusterpolicyreports"}
)

// PolicyReportName names a module's PolicyReports.
func PolicyReportName(module string) string { return "vigil-" + module }

// AuditedKinds are the kinds the audit lists, each with the namespaces its
// bindings are limited to (nil for all): those of the validations registered
// when ready, and of the mutations with an outage bound (Audited).
// Fail-closed ones enforce from install on, and a subresource's object (a
// Scale) is no object to list: its parent is audited by the parent's own
// bindings.
func (m *Module) AuditedKinds() map[schema.GroupVersionKind][]string {
	kinds := map[schema.GroupVersionKind][]string{}
	for _, b := range m.Bindings {
		if !Audited(b) {
			continue
		}
		if have, seen := kinds[b.GVK]; !seen {
			kinds[b.GVK] = append([]string(nil), b.Namespaces...)
		} else if len(b.Namespaces) == 0 || len(have) == 0 {
			kinds[b.GVK] = nil
		} else {
			for _, ns := range b.Namespaces {
				if !slices.Contains(have, ns) {
					have = append(have, ns)
				}
			}
			kinds[b.GVK] = have
		}
	}
	return kinds
}

// ReportNamespaces are where a module's PolicyReports can be: the audited
// namespaces, sorted, or all ("") when an audited binding is cluster-wide.
func (m *Module) ReportNamespaces() []string {
	seen := map[string]bool{}
	for _, namespaces := range m.AuditedKinds() {
		if len(namespaces) == 0 {
			return []string{metav1.NamespaceAll}
		}
		for _, ns := range namespaces {
			seen[ns] = true
		}
	}
	var out []string
	for ns := range seen {
		out = append(out, ns)
	}
	sort.Strings(out)
	return out
}

// The module's two kinds of pod, each with its own ServiceAccount.
const (
	// PodAdmission is the admission pod: its gate init containers and the
	// admission container.
	PodAdmission = "admission"
	// PodWatcher is the watcher pod.
	PodWatcher = "watcher"
)

// ServiceAccount is the ServiceAccount of one kind of the module's pods.
func ServiceAccount(module, role string) string {
	if role == PodWatcher {
		return module + "-watcher"
	}
	return module
}

// NamespaceRoleName is the ClusterRole that holds a ServiceAccount's rights
// in one namespace other than the module's own: the namespace may not exist
// when the module is installed, so the rights ship cluster-scoped and the
// role binds them in the namespace once it exists (BindingName).
func NamespaceRoleName(serviceAccount, namespace string) string {
	return "vigil:" + serviceAccount + ":" + namespace
}

// BindingName is the RoleBinding a role creates in a namespace it has rights
// in (NamespaceRoleName), and the name of the ClusterRole and binding that
// allow it to.
func BindingName(serviceAccount string) string { return "vigil:" + serviceAccount }

// FinalizerPolicyName names the MutatingAdmissionPolicy that puts a Finalize
// binding's finalizer on its objects as they are created, and its binding:
// <module>-finalizer-<capability>.<binding>, in the letters a name allows.
func FinalizerPolicyName(module, finalizer string) string {
	suffix := strings.ToLower(strings.TrimPrefix(finalizer, FinalizerPrefix(module)))
	suffix = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '-' {
			return r
		}
		return '-'
	}, suffix)
	return strings.Trim(module+"-finalizer-"+suffix, ".-")
}
