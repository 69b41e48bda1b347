package vigil

import (
	"context"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/google/cel-go/cel"
	admissionv1 "k8s.io/api/admission/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/admit"
	"github.com/vigilkit/vigil/internal/scheme"
	"github.com/vigilkit/vigil/internal/spec"
)

// Request is an admission request with its objects decoded as T.
type Request[T client.Object] = admission.Request[T]

// Verdict is a validation's answer: admission.Allow, admission.Deny,
// admission.DenyCode or admission.Warn.
type Verdict = admission.Verdict

// Capability groups a module's bindings: they share a name in messages and
// metrics, a Store scope, and the namespaces they apply to.
type Capability struct {
	m *Module
	c spec.Capability
}

// CapabilityOption configures a Capability.
type CapabilityOption func(*Capability)

// InNamespaces limits a capability to the namespaces; without it, it is
// cluster-wide.
func InNamespaces(namespaces ...string) CapabilityOption {
	return func(c *Capability) { c.c.Namespaces = append(c.c.Namespaces, namespaces...) }
}

// FailClosed makes a capability's webhooks static, with failurePolicy Fail
// from install on, for policies that must never have an unguarded window. The
// objects the module's gates wait for are still excluded, so the module
// cannot lock itself out.
func FailClosed() CapabilityOption {
	return func(c *Capability) { c.c.FailClosed = true }
}

// EnforcementMode is what a capability's validations do with a denial.
type EnforcementMode = spec.Mode

// The enforcement modes, for Mode.
const (
	Enforce = spec.Enforce // deny what a validation denies: the default
	Warn    = spec.Warn    // allow it, with the denial as a warning to the client
	Audit   = spec.Audit   // allow it silently, and record it as a finding
)

// Mode sets what the capability's validations do with a denial, so a new
// policy can be rolled out in Audit, then Warn, before it is enforced: Warn
// allows with the denial as a warning; Audit allows and records a finding (a
// log line with the event audit-finding, and
// vigil_admission_unenforced_denials_total). Mutations, and the failure
// policy's answer to a binding that fails, are unaffected. A fail-closed
// capability enforces.
func Mode(mode EnforcementMode) CapabilityOption {
	return func(c *Capability) { c.c.Mode = mode }
}

// FailOpenAfter lets the capability's webhooks fail open during an outage:
// once no admission replica has served for d, the module's watcher (which
// then runs, leader-elected, in its own Deployment) sets them to
// failurePolicy Ignore, and the first replica that serves again enforces
// them once more. Without it an outage fails closed, the safe default: an
// automatic fail-open hands anyone who can kill the admission pods an off
// switch. A fail-closed capability cannot have one; `plan` lists it.
func FailOpenAfter(d time.Duration) CapabilityOption {
	site := callSite(1)
	return func(c *Capability) { c.c.FailOpen = &spec.FailOpen{After: d, Site: site} }
}

// OptOutLabel lets namespaces and objects labelled key=true opt out of the
// capability's webhooks. Only the allowed — usernames (a ServiceAccount is
// system:serviceaccount:<namespace>:<name>) and groups prefixed "group:" —
// may set, change or remove the label, on any namespace or object: a
// ValidatingAdmissionPolicy in the module's manifests refuses everyone else,
// whether the module runs or not. A fail-closed capability cannot have one.
func OptOutLabel(key string, allowed ...string) CapabilityOption {
	site := callSite(1)
	return func(c *Capability) { c.c.OptOut = &spec.OptOut{Label: key, Allowed: allowed, Site: site} }
}

// Capability declares a group of bindings.
func (m *Module) Capability(name string, opts ...CapabilityOption) *Capability {
	c := &Capability{m: m, c: spec.Capability{Name: name, Site: callSite(1)}}
	for _, o := range opts {
		o(c)
	}
	m.d.AddCapability(1, c.c)
	return c
}

// Name is the capability's name.
func (c *Capability) Name() string { return c.c.Name }

// WhenBuilder declares what a capability does with objects of type T.
type WhenBuilder[T client.Object] struct {
	c       *Capability
	proto   T
	gvk     schema.GroupVersionKind
	ops     []admissionv1.Operation
	filters []spec.Filter
	name    string
	site    string
	// parent and subresource name a subresource's requests: see Subresource
	// and WhenScaled.
	parent      schema.GroupVersionKind
	subresource string

	// What a watch could select on the server: see watcher.Agree.
	inNamespaces []string
	labels       map[string]*string
	selName      string
}

// When starts a binding of the capability to objects of proto's type.
func When[T client.Object](c *Capability, proto T) *WhenBuilder[T] {
	b := &WhenBuilder[T]{c: c, proto: proto, site: callSite(1)}
	gvk, err := scheme.GVKOf(c.m.d.Scheme, proto)
	if err != nil {
		c.m.recordf(1, "When: %v", err)
	}
	b.gvk = gvk
	return b
}

// WhenScaled starts a binding to the scale requests of parent's resource —
// `kubectl scale`, an autoscaler — which carry an autoscaling/v1 Scale, not
// the parent: WhenScaled(c, &appsv1.Deployment{}).IsUpdated().Validate(...)
// judges deployments/scale. Bind the parent itself with When as well, or its
// replicas change around the Validate through plain updates.
func WhenScaled(c *Capability, parent client.Object) *WhenBuilder[*autoscalingv1.Scale] {
	b := &WhenBuilder[*autoscalingv1.Scale]{c: c, proto: &autoscalingv1.Scale{}, site: callSite(1), subresource: "scale"}
	var err error
	if b.gvk, err = scheme.GVKOf(c.m.d.Scheme, b.proto); err != nil {
		c.m.recordf(1, "WhenScaled: %v", err)
	}
	if b.parent, err = scheme.GVKOf(c.m.d.Scheme, parent); err != nil {
		c.m.recordf(1, "WhenScaled: %v", err)
	}
	return b
}

// Subresource binds to the requests for a subresource of T's resource whose
// requests carry T itself, such as "ephemeralcontainers" of Pods (kubectl
// debug) or "status". A binding without it sees the resource's own requests
// only. For "scale", use WhenScaled.
func (b *WhenBuilder[T]) Subresource(name string) *WhenBuilder[T] {
	if name == "" || name == "scale" || strings.Contains(name, "/") {
		b.c.m.recordf(1, "Subresource(%q): expected a subresource whose requests carry %s, such as \"ephemeralcontainers\" or \"status\"; for scale use WhenScaled", name, b.gvk.Kind)
		return b
	}
	b.subresource = name
	return b
}

// IsCreated binds to CREATE requests.
func (b *WhenBuilder[T]) IsCreated() *WhenBuilder[T] { return b.on(admissionv1.Create) }

// IsUpdated binds to UPDATE requests.
func (b *WhenBuilder[T]) IsUpdated() *WhenBuilder[T] { return b.on(admissionv1.Update) }

// IsCreatedOrUpdated binds to CREATE and UPDATE requests.
func (b *WhenBuilder[T]) IsCreatedOrUpdated() *WhenBuilder[T] {
	return b.on(admissionv1.Create, admissionv1.Update)
}

// IsDeleted binds to DELETE requests; the request's Object is the object
// being deleted.
func (b *WhenBuilder[T]) IsDeleted() *WhenBuilder[T] { return b.on(admissionv1.Delete) }

func (b *WhenBuilder[T]) on(ops ...admissionv1.Operation) *WhenBuilder[T] {
	b.ops = append(b.ops, ops...)
	return b
}

// InNamespace runs the binding only for objects in these namespaces.
func (b *WhenBuilder[T]) InNamespace(namespaces ...string) *WhenBuilder[T] {
	b.filters = append(b.filters, spec.InNamespace(namespaces...))
	b.inNamespaces = append(b.inNamespaces, namespaces...)
	return b
}

// InNamespaceRegex runs the binding only in namespaces matching the regular
// expression.
func (b *WhenBuilder[T]) InNamespaceRegex(expr string) *WhenBuilder[T] {
	if re := b.compile("InNamespaceRegex", expr); re != nil {
		b.filters = append(b.filters, spec.InNamespaceRegex(re))
	}
	return b
}

// WithName runs the binding only for the object of this name.
func (b *WhenBuilder[T]) WithName(name string) *WhenBuilder[T] {
	b.filters = append(b.filters, spec.WithName(name))
	b.selName = name
	return b
}

// WithNameRegex runs the binding only for objects whose name matches.
func (b *WhenBuilder[T]) WithNameRegex(expr string) *WhenBuilder[T] {
	if re := b.compile("WithNameRegex", expr); re != nil {
		b.filters = append(b.filters, spec.WithNameRegex(re))
	}
	return b
}

// WithLabel runs the binding only for objects with the label (and value).
func (b *WhenBuilder[T]) WithLabel(key string, value ...string) *WhenBuilder[T] {
	if len(value) > 1 {
		b.c.m.recordf(1, "WithLabel(%q): expected one value at most, got %d", key, len(value))
	}
	b.filters = append(b.filters, spec.WithLabel(key, value...))
	if b.labels == nil {
		b.labels = map[string]*string{}
	}
	if len(value) > 0 {
		b.labels[key] = &value[0]
	} else {
		b.labels[key] = nil
	}
	return b
}

// WithAnnotation runs the binding only for objects with the annotation (and
// value).
func (b *WhenBuilder[T]) WithAnnotation(key string, value ...string) *WhenBuilder[T] {
	if len(value) > 1 {
		b.c.m.recordf(1, "WithAnnotation(%q): expected one value at most, got %d", key, len(value))
	}
	b.filters = append(b.filters, spec.WithAnnotation(key, value...))
	return b
}

// WithDeletionTimestamp runs the binding only for objects being deleted.
func (b *WhenBuilder[T]) WithDeletionTimestamp() *WhenBuilder[T] {
	b.filters = append(b.filters, spec.WithDeletionTimestamp())
	return b
}

// Named names the binding in messages and metrics; by default it is named
// after its kind, action and place.
func (b *WhenBuilder[T]) Named(name string) *WhenBuilder[T] {
	if problems := validation.IsDNS1123Label(name); len(problems) > 0 {
		b.c.m.recordf(1, "binding name %q: %s", name, strings.Join(problems, "; "))
	}
	b.name = name
	return b
}

func (b *WhenBuilder[T]) compile(method, expr string) *regexp.Regexp {
	re, err := regexp.Compile(expr)
	if err != nil {
		b.c.m.recordf(2, "%s(%q): expected a Go regular expression: %v", method, expr, err)
		return nil
	}
	return re
}

// Mutate edits matching objects with fn; the module sends the API server the
// JSON patch of its edits. An error answers by the module's failure policy.
func (b *WhenBuilder[T]) Mutate(fn func(ctx context.Context, req *Request[T]) error) {
	b.add(admit.MutateBinding(b.gvk, b.proto, fn), "mutate")
}

// Validate judges matching objects with fn.
func (b *WhenBuilder[T]) Validate(fn func(ctx context.Context, req *Request[T]) Verdict) {
	b.add(admit.ValidateBinding(b.gvk, b.proto, fn), "validate")
}

// Require makes the API server itself refuse matching requests for which the
// CEL expression is not true, with message as the denial: a
// ValidatingAdmissionPolicy and its binding in the module's manifests, with
// no call to the module. So a check of the object alone costs a request no
// webhook round trip, and holds from install on, whether the module runs or
// not. The expression sees object, oldObject, request and namespaceObject as
// a ValidatingAdmissionPolicy does, for example
//
//	has(object.metadata.labels) && 'app' in object.metadata.labels
//
// The capability's namespaces and opt-out label apply, and its mode: Warn and
// Audit become the policy binding's Warn and Audit actions (Audit writes to
// the API server's audit log, not the module's findings). The objects the
// module's gates wait for are excluded. A check takes no filters (WithLabel
// and the like): write them into the expression. Use Validate for what needs
// Go, the Store or listers.
func (b *WhenBuilder[T]) Require(expression, message string) {
	m := b.c.m
	if len(b.ops) == 0 {
		m.recordf(1, "When(%s).Require: no operation: call IsCreated, IsUpdated, IsCreatedOrUpdated or IsDeleted first", b.gvk.Kind)
	}
	if len(b.filters) > 0 {
		m.recordf(1, "When(%s).Require: a check takes no filters (WithLabel, WithName and the like), the API server evaluates it alone: write the condition into the expression, as in !has(object.metadata.labels) || ...", b.gvk.Kind)
	}
	if strings.TrimSpace(expression) == "" {
		m.recordf(1, "When(%s).Require: expected a CEL expression, got none", b.gvk.Kind)
	} else if err := checkCEL(expression); err != nil {
		m.recordf(1, "When(%s).Require(%q): expected a CEL expression: %v", b.gvk.Kind, expression, err)
	}
	if strings.TrimSpace(message) == "" || strings.ContainsAny(message, "\r\n") {
		m.recordf(1, "When(%s).Require: message %q: expected the denial, one line", b.gvk.Kind, message)
	}
	c := spec.Check{
		Capability: b.c.c.Name, Name: b.name, GVK: b.gvk, Operations: b.ops, Namespaces: b.c.c.Namespaces,
		Parent: b.parent, Subresource: b.subresource, OptOut: b.c.c.OptOutLabel(),
		Expression: expression, Message: message, Site: callSite(1),
	}
	if c.Name != "" {
		if problems := validation.IsDNS1123Subdomain(spec.CheckName(m.d.Name, c.Capability, c.Name)); len(problems) > 0 {
			m.recordf(1, "When(%s).Require: the policy's name %q: %s: name the capability or the check otherwise", b.gvk.Kind, spec.CheckName(m.d.Name, c.Capability, c.Name), strings.Join(problems, "; "))
		}
	}
	m.d.AddCheck(c)
}

// parseEnv parses checks' expressions: made once, as making one costs more
// than parsing a short expression.
var parseEnv = sync.OnceValues(func() (*cel.Env, error) { return cel.NewEnv() })

// checkCEL reports a CEL expression that does not parse. Its types and
// functions are the API server's to check when the policy is applied.
func checkCEL(expression string) error {
	env, err := parseEnv()
	if err != nil {
		return err
	}
	if _, iss := env.Parse(expression); iss.Err() != nil {
		return iss.Err()
	}
	return nil
}

func (b *WhenBuilder[T]) add(binding spec.Binding, action string) {
	m := b.c.m
	if len(b.ops) == 0 {
		m.recordf(2, "When(%s).%s: no operation: call IsCreated, IsUpdated, IsCreatedOrUpdated or IsDeleted first", b.gvk.Kind, strings.ToUpper(action[:1])+action[1:])
	}
	binding.Capability = b.c.c.Name
	binding.Operations = b.ops
	binding.Namespaces = b.c.c.Namespaces
	binding.FailClosed = b.c.c.FailClosed
	binding.OptOut = b.c.c.OptOutLabel()
	binding.FailOpenAfter = b.c.c.FailOpenAfter()
	binding.Filters = b.filters
	binding.Parent, binding.Subresource = b.parent, b.subresource
	binding.Name = b.name
	binding.Site = b.site
	m.d.AddBinding(binding)
}
