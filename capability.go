package vigil

import (
	"context"
	"fmt"
	"slices"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/define"
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
// capability's other webhook leaves them out.
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
	m.d.AddCapability(c.c)
	return c
}

// Name is the capability's name.
func (c *Capability) Name() string { return c.c.Name }

// AdmissionBuilder declares what a capability admits of objects of type T:
// operations, filters, then Mutate, Validate or Require. A filter returns a
// FilteredAdmissionBuilder, which has no Require.
type AdmissionBuilder[T client.Object] struct {
	admissionOptions[T, *AdmissionBuilder[T]]
	filterOptions[*FilteredAdmissionBuilder[T]]
}

// FilteredAdmissionBuilder is an AdmissionBuilder after a filter: it ends
// with Mutate or Validate.
type FilteredAdmissionBuilder[T client.Object] struct {
	admissionOptions[T, *FilteredAdmissionBuilder[T]]
	filterOptions[*FilteredAdmissionBuilder[T]]
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
	b := &AdmissionBuilder[T]{}
	f := &FilteredAdmissionBuilder[T]{}
	b.admissionOptions = admissionOptions[T, *AdmissionBuilder[T]]{self: b, ad: d}
	f.admissionOptions = admissionOptions[T, *FilteredAdmissionBuilder[T]]{self: f, ad: d}
	b.filterOptions = filterOptions[*FilteredAdmissionBuilder[T]]{next: f, fd: d}
	f.filterOptions = b.filterOptions
	return b
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

// admissionOptions are what every admission builder has; each option returns
// the builder it is called on (B).
type admissionOptions[T client.Object, B any] struct {
	self B
	ad   *define.Binding
}

// Subresource binds to a subresource whose requests carry T itself, such as
// "ephemeralcontainers" or "status"; for "scale", use WhenScaled.
func (o admissionOptions[T, B]) Subresource(name string) B {
	o.ad.SetSubresource(define.Caller(), name)
	return o.self
}

// IsCreated binds to CREATE requests.
func (o admissionOptions[T, B]) IsCreated() B { o.ad.On(admissionv1.Create); return o.self }

// IsUpdated binds to UPDATE requests.
func (o admissionOptions[T, B]) IsUpdated() B { o.ad.On(admissionv1.Update); return o.self }

// IsCreatedOrUpdated binds to CREATE and UPDATE requests.
func (o admissionOptions[T, B]) IsCreatedOrUpdated() B {
	o.ad.On(admissionv1.Create, admissionv1.Update)
	return o.self
}

// IsDeleted binds to DELETE requests; the request's Object is the object
// being deleted.
func (o admissionOptions[T, B]) IsDeleted() B { o.ad.On(admissionv1.Delete); return o.self }

// IfServed registers the binding only while the API server serves its kind:
// a binding on a CRD that may be installed later, or never (a Prometheus
// Probe where the cluster may run no Prometheus), neither holds the module's
// other webhooks back nor fails their registration; it joins its webhook's
// rules within a registration check (--registration-check-interval) of its
// CRD being served. Until then its kind's objects pass unchecked, as plan
// says.
func (o admissionOptions[T, B]) IfServed() B { o.ad.IfServed = true; return o.self }

// Named names the binding in messages and metrics; by default it is named
// after its kind, action and place.
func (o admissionOptions[T, B]) Named(name string) B {
	o.ad.SetName(define.Caller(), name)
	return o.self
}

// PodTemplates makes a validation of Pods also judge the pod templates of
// Deployments, ReplicaSets, StatefulSets, DaemonSets, Jobs and CronJobs when
// they are created or their template changes, so that `kubectl apply` of a
// workload whose pods would be denied is answered then, not by a
// ReplicaSet that quietly makes no pods. fn sees the Pod the template makes:
// named after the workload (a Deployment web's pods are judged as a Pod
// web), in its namespace, with the template's labels, annotations and spec,
// as a CREATE. An update that leaves the template as it was (a scale) is
// not judged.
//
// mode is what a denial does to the workload: TemplatesWarn (the default)
// admits it with the denial as a warning; TemplatesDeny refuses it. A rule
// that exempts Pods by their generated names (web-7d4b9c-x2x9q) cannot
// exempt a template, which has none: under TemplatesDeny such a workload
// is refused although its pods would be admitted, so keep TemplatesWarn
// where exemptions name pods. The capability's webhook then also matches
// these six kinds, under its failure policy: with Fail, applying a
// workload waits for the module as creating a Pod does.
//
// Without PodTemplates (the default), a Pod binding judges Pods alone.
func (o admissionOptions[T, B]) PodTemplates(mode ...TemplateMode) B {
	m := TemplatesWarn
	if len(mode) > 0 {
		m = mode[0]
	}
	if len(mode) > 1 {
		o.ad.SetPodTemplates(define.Caller(), define.TemplateMode(fmt.Sprint(mode)))
		return o.self
	}
	o.ad.SetPodTemplates(define.Caller(), define.TemplateMode(m))
	return o.self
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

// Mutate edits matching objects with fn; the API server gets the JSON patch.
// An error answers by the module's failure policy.
func (o admissionOptions[T, B]) Mutate(fn func(ctx context.Context, req *Request[T]) error) {
	o.ad.AddAdmission(define.Caller(), define.MutateBinding(o.ad.GVK, o.ad.Proto.(T), fn), "mutate")
}

// Validate judges matching objects with fn.
func (o admissionOptions[T, B]) Validate(fn func(ctx context.Context, req *Request[T]) Verdict) {
	o.ad.AddAdmission(define.Caller(), define.ValidateBinding(o.ad.GVK, o.ad.Proto.(T), fn), "validate")
}

// filterOptions are the Go filters of admission and watch builders; each
// returns F, the builder that follows a filter.
type filterOptions[F any] struct {
	next F
	fd   *define.Binding
}

// InNamespace runs the binding only for objects in these namespaces.
func (o filterOptions[F]) InNamespace(namespaces ...string) F {
	o.fd.InNamespace(namespaces)
	return o.next
}

// InNamespaceRegex runs the binding only in namespaces matching the regular
// expression.
func (o filterOptions[F]) InNamespaceRegex(expr string) F {
	o.fd.InNamespaceRegex(define.Caller(), expr)
	return o.next
}

// WithName runs the binding only for the object of this name.
func (o filterOptions[F]) WithName(name string) F { o.fd.WithName(name); return o.next }

// WithNameRegex runs the binding only for objects whose name matches.
func (o filterOptions[F]) WithNameRegex(expr string) F {
	o.fd.WithNameRegex(define.Caller(), expr)
	return o.next
}

// WithLabel runs the binding only for objects that have the label.
func (o filterOptions[F]) WithLabel(key string) F { o.fd.WithLabel(key, nil); return o.next }

// WithLabelValue runs the binding only for objects with the label set to
// value.
func (o filterOptions[F]) WithLabelValue(key, value string) F {
	o.fd.WithLabel(key, &value)
	return o.next
}

// WithAnnotation runs the binding only for objects that have the annotation.
func (o filterOptions[F]) WithAnnotation(key string) F { o.fd.WithAnnotation(key, nil); return o.next }

// WithAnnotationValue runs the binding only for objects with the annotation
// set to value.
func (o filterOptions[F]) WithAnnotationValue(key, value string) F {
	o.fd.WithAnnotation(key, &value)
	return o.next
}

// WhileTerminating runs the binding only for objects being deleted: those
// with a deletion timestamp, held by a finalizer.
func (o filterOptions[F]) WhileTerminating() F { o.fd.WhileTerminating(); return o.next }
