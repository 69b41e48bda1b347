package vigil

import (
	"slices"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/definition/define"
	"github.com/vigilkit/vigil/internal/definition/spec"
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

// FailClosed makes a capability's webhooks static, failurePolicy Fail from
// install on; the objects the module's gates wait for stay excluded.
func FailClosed() CapabilityOption {
	return func(c *Capability) { c.c.FailClosed = true }
}

// EnforcementMode is what a capability's validations do with a denial.
type EnforcementMode string

// The enforcement modes, for Mode. They are named apart from the verdicts
// admission.Warn and admission.Deny, which a validation returns.
const (
	ModeEnforce EnforcementMode = EnforcementMode(spec.Enforce) // deny what a validation denies: the default
	ModeWarn    EnforcementMode = EnforcementMode(spec.Warn)    // allow it, with the denial as a warning to the client
	ModeAudit   EnforcementMode = EnforcementMode(spec.Audit)   // allow it silently, and record it as a finding
)

// Mode sets what the capability's validations do with a denial: ModeWarn
// allows with it as a warning, ModeAudit allows and records a finding (the log
// event audit-finding, vigil_admission_unenforced_denials_total). Mutations
// and failure-policy answers are unaffected; a fail-closed capability enforces.
func Mode(mode EnforcementMode) CapabilityOption {
	return func(c *Capability) { c.c.Mode = spec.Mode(mode) }
}

// JoinDenials runs every validation of the capability on a request, even
// after one denies, and answers with all their denials, the messages joined
// with "; " in the order the bindings were declared — as Pepr answers, so
// that messages users and their tests match on stay the same when a Pepr
// module moves to vigil. Without it the first denial answers.
func JoinDenials() CapabilityOption {
	return func(c *Capability) { c.c.JoinDenials = true }
}

// FailurePolicyIn answers the capability's requests in these namespaces
// with policy when the module fails or cannot be reached, in place of the
// capability's (or the module's) failure policy — as UDS Core keeps its
// policies Fail everywhere but Ignore in istio-system, whose pods the
// module's own pods may wait for. The same bindings judge every namespace;
// the namespaces get a webhook of their own, which plan shows, and the
// capability's other webhook leaves them out. A capability limited with
// InNamespaces governs these namespaces too, as Pepr's additionalWebhooks
// do: its bindings, checks and watches reach them.
//
//	policies := m.Capability("policies", vigil.FailurePolicyIn(admission.Ignore, "istio-system"))
func FailurePolicyIn(policy admission.FailurePolicy, namespaces ...string) CapabilityOption {
	site := define.Caller()
	return func(c *Capability) {
		c.c.NamespacePolicies = append(c.c.NamespacePolicies, spec.NamespacePolicy{Policy: policy, Namespaces: slices.Clone(namespaces), Site: site})
	}
}

// FailOpenAfter lets the capability's webhooks fail open once no admission
// replica has served for d: the module's watcher sets them to failurePolicy
// Ignore until a replica serves again. Without it an outage fails closed. A
// fail-closed capability cannot have one.
func FailOpenAfter(d time.Duration) CapabilityOption {
	site := define.Caller()
	return func(c *Capability) { c.c.FailOpen = &spec.FailOpen{After: d, Site: site} }
}

// OptOutLabel lets namespaces and objects labelled key=true opt out of the
// capability's webhooks. Only the allowed (usernames, "group:" groups) may set,
// change or remove the label: a ValidatingAdmissionPolicy refuses everyone
// else. A fail-closed capability cannot have one.
func OptOutLabel(key string, allowed ...string) CapabilityOption {
	site := define.Caller()
	return func(c *Capability) { c.c.OptOut = &spec.OptOut{Label: key, Allowed: allowed, Site: site} }
}

// OptInLabel limits the capability's webhooks and checks to namespaces
// labelled key=true: a policy rolled out namespace by namespace. Objects in
// other namespaces are not sent to it (cluster-scoped objects other than
// Namespaces still are). Only the allowed (usernames, "group:" groups) may
// set, change or remove the label — removing it switches the policy off in
// that namespace — : a ValidatingAdmissionPolicy, which holds while the
// module is down, refuses everyone else. A capability has an opt-in or an
// opt-out label, not both; a fail-closed capability has neither.
func OptInLabel(key string, allowed ...string) CapabilityOption {
	site := define.Caller()
	return func(c *Capability) { c.c.OptIn = &spec.OptOut{Label: key, Allowed: allowed, Site: site} }
}

// Capability declares a group of bindings.
func (m *Module) Capability(name string, opts ...CapabilityOption) *Capability {
	c := &Capability{m: m, c: spec.Capability{Name: name, Site: define.Caller()}}
	for _, o := range opts {
		o(c)
	}
	c.c = m.d.AddCapability(c.c)
	return c
}

// Name is the capability's name.
func (c *Capability) Name() string { return c.c.Name }

//go:generate go run ./hack/builders

// AdmissionBuilder declares what a capability admits of objects of type T:
// operations, filters, then Mutate, Validate or Require. A filter returns a
// FilteredAdmissionBuilder, which has no Require.
type AdmissionBuilder[T client.Object] struct {
	ad       *define.Binding
	filtered *FilteredAdmissionBuilder[T] // what a filter returns
}

// FilteredAdmissionBuilder is an AdmissionBuilder after a filter: it ends
// with Mutate or Validate.
type FilteredAdmissionBuilder[T client.Object] struct {
	ad *define.Binding
}

// When starts an admission binding of the capability to objects of proto's
// type.
func When[T client.Object](c *Capability, proto T) *AdmissionBuilder[T] {
	return newAdmission[T](define.NewBinding(c.m.d, c.c, proto, "When", define.Caller()))
}

// WhenScaled starts a binding to the scale requests of parent's resource
// (kubectl scale, autoscalers), which carry an autoscaling/v1 Scale. Bind the
// parent with When as well, or its replicas change through plain updates.
func WhenScaled(c *Capability, parent client.Object) *AdmissionBuilder[*autoscalingv1.Scale] {
	return newAdmission[*autoscalingv1.Scale](define.NewScaleBinding(c.m.d, c.c, parent, define.Caller()))
}

func newAdmission[T client.Object](d *define.Binding) *AdmissionBuilder[T] {
	return &AdmissionBuilder[T]{ad: d, filtered: &FilteredAdmissionBuilder[T]{ad: d}}
}

// Require makes the API server refuse matching requests for which the CEL
// expression is not true, with message as the denial: a
// ValidatingAdmissionPolicy in the module's manifests, holding whether the
// module runs or not. The expression sees object, oldObject, request and
// namespaceObject, e.g. has(object.metadata.labels). The capability's
// namespaces, opt-out label and mode apply. A filtered builder has no
// Require: write filters into the expression.
func (b *AdmissionBuilder[T]) Require(expression, message string) {
	b.ad.AddCheck(define.Caller(), expression, message)
}

// TemplateMode is what PodTemplates does with a denial of a workload's pod
// template.
type TemplateMode string

const (
	// TemplatesWarn admits the workload with the denial as a warning.
	TemplatesWarn TemplateMode = TemplateMode(define.TemplatesWarn)
	// TemplatesDeny refuses the workload with the denial.
	TemplatesDeny TemplateMode = TemplateMode(define.TemplatesDeny)
)
