package manifests

import (
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/spec"
)

// Module is what the manifests are derived from: a module's definition as
// data.
type Module struct {
	Name      string
	Namespace string
	Version   string
	// Gates are the startup gates, every phase.
	Gates []Gate
	// Bindings are the admission bindings, registered when ready or
	// fail-closed.
	Bindings []spec.Binding
	// Watches are the Watch, Reconcile and Finalize bindings.
	Watches []Watch
	// Listers are the kinds read through listers, by every role.
	Listers []schema.GroupVersionKind
	// Schedules name the module's schedules.
	Schedules []string
	// Rules are declared by the author for what handlers call.
	Rules []Rule
	// FailurePolicy and TimeoutSeconds of the webhooks.
	FailurePolicy  admission.FailurePolicy
	TimeoutSeconds int32
}

// Gate is one startup gate.
type Gate struct {
	Name  string
	Phase int
	// Sample gates poll a function: they read nothing from the API server.
	Sample    bool
	GVK       schema.GroupVersionKind
	Namespace string
	// ObjectName is the one object the gate waits for, watched with a
	// metadata.name field selector; empty for selectors.
	ObjectName string
	// Labels is the gate's label selector, as text.
	Labels string
	// Creates are the objects the gate's callback creates.
	Creates []Object
	Site    string
}

// Object is an object by kind, namespace and name (empty for any).
type Object struct {
	GVK       schema.GroupVersionKind
	Namespace string
	Name      string
}

// Watch is one Watch, Reconcile or Finalize binding.
type Watch struct {
	ID   string
	Role string
	GVK  schema.GroupVersionKind
	// Namespaces the binding is limited to; empty for all.
	Namespaces []string
	// Name is the one object the binding selects; empty for all.
	Name     string
	Finalize bool
	Site     string
}

// Rule is an RBAC rule and why the module needs it.
type Rule struct {
	// Role is the kind of pod whose ServiceAccount gets the rule: Admission
	// or Watcher.
	Role string
	// Namespace of a namespaced rule (a Role); empty for a ClusterRole.
	Namespace string
	rbacv1.PolicyRule
	// Why names the gate, binding or feature that needs the rule.
	Why string
}

// HasAdmission reports whether the module runs the admission role: it has
// gates to run before it, bindings to serve, or listers to keep.
func (m *Module) HasAdmission() bool {
	return len(m.Gates) > 0 || len(m.Bindings) > 0
}

// HasWatcher reports whether the module runs the watcher role.
func (m *Module) HasWatcher() bool {
	return len(m.Watches) > 0 || len(m.Schedules) > 0
}
