package spec

import (
	"context"
	"reflect"
	"slices"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/store"
)

// Capability groups bindings: they share a name in messages and metrics, a
// Store scope, and the namespaces they apply to.
type Capability struct {
	Name string `json:"name"`
	// FailClosed capabilities are served by static webhooks with
	// failurePolicy Fail from install on.
	FailClosed bool `json:"failClosed"`
	// Namespaces the capability is limited to; empty for all.
	Namespaces []string `json:"namespaces"`
	// OptOut, when set, lets namespaces and objects labelled with it opt out
	// of the capability's webhooks; never set on a fail-closed capability.
	OptOut *OptOut `json:"optOut,omitempty"`
	// OptIn, when set, limits the capability's webhooks and checks to
	// namespaces labelled with it (Label=true), and only its Allowed may
	// set, change or remove the label; never set with OptOut or on a
	// fail-closed capability.
	OptIn *OptOut `json:"optIn,omitempty"`
	// Mode is what the capability's validations do with a denial: Enforce
	// (the default), Warn or Audit. Mutations are unaffected by it.
	Mode Mode `json:"mode"`
	// FailOpen, when set, lets the capability's webhooks fail open after
	// an outage of every admission replica lasting its bound; never set on
	// a fail-closed capability.
	FailOpen *FailOpen `json:"failOpen,omitempty"`
	// FailurePolicy, when set, overrides the module's for this capability's
	// webhooks and failed bindings: set at start by --failure-policy (the
	// chart's failurePolicy value), never Ignore on a fail-closed one.
	FailurePolicy admission.FailurePolicy `json:"failurePolicy,omitempty"`
	// JoinDenials runs every validation of the capability on a request, and
	// answers the denials together, their messages joined with "; " in the
	// order the bindings were declared.
	JoinDenials bool `json:"joinDenials,omitempty"`
	// NamespacePolicies are failure policies for requests in some
	// namespaces, in place of the capability's (or the module's): each its
	// own webhook, the capability's other webhook leaving those namespaces
	// out.
	NamespacePolicies []NamespacePolicy `json:"namespacePolicies,omitempty"`
	Site              string            `json:"site"`
}

// NamespacePolicy is a capability's failure policy in some namespaces.
type NamespacePolicy struct {
	Policy     admission.FailurePolicy `json:"policy"`
	Namespaces []string                `json:"namespaces"`
	Site       string                  `json:"site"`
}

// PolicyIn is the failure policy the capability's NamespacePolicies give
// requests in namespace ns; ok is false where none does.
func PolicyIn(nps []NamespacePolicy, ns string) (p admission.FailurePolicy, ok bool) {
	for _, np := range nps {
		if ns != "" && slices.Contains(np.Namespaces, ns) {
			return np.Policy, true
		}
	}
	return "", false
}

// FailOpen is a capability's declared outage bound: once no admission
// replica has served for After, the watcher's leader sets the capability's
// webhooks to failurePolicy Ignore, and a replica that serves again sets
// them back.
type FailOpen struct {
	After time.Duration `json:"after"`
	Site  string        `json:"site"`
}

// FailOpenAfter is the capability's outage bound; zero when it fails
// closed during an outage.
func (c *Capability) FailOpenAfter() time.Duration {
	if c.FailOpen == nil {
		return 0
	}
	return c.FailOpen.After
}

// Mode is what a capability's validations do with a denial, as Gatekeeper's
// enforcementAction and Kyverno's validationFailureAction do: a new policy is
// rolled out in Audit, then Warn, then Enforce. It never changes a mutation,
// nor the answer to a binding that fails (an error, a panic, a timeout),
// which the failure policy gives.
type Mode string

const (
	// Enforce denies what a validation denies.
	Enforce Mode = "Enforce"
	// Warn allows what a validation denies, with the denial as a warning to
	// the client.
	Warn Mode = "Warn"
	// Audit allows what a validation denies, silently to the client, and
	// records it as a finding: a log line (the event audit-finding) and
	// vigil_admission_unenforced_denials_total.
	Audit Mode = "Audit"
)

// Valid reports whether m is one of the modes.
func (m Mode) Valid() bool { return m == Enforce || m == Warn || m == Audit }

// OptOutLabel is the capability's opt-out label; empty when it has none.
func (c *Capability) OptOutLabel() string {
	if c.OptOut == nil {
		return ""
	}
	return c.OptOut.Label
}

// OptInLabel is the capability's opt-in label; empty when it has none.
func (c *Capability) OptInLabel() string {
	if c.OptIn == nil {
		return ""
	}
	return c.OptIn.Label
}

// OptOut is a capability's opt-out label (or, as Capability.OptIn, its
// opt-in label): a namespace or object labelled
// Label=true is not sent to the capability's webhooks, and only Allowed may
// set, change or remove the label anywhere (a ValidatingAdmissionPolicy the
// module's manifests install refuses everyone else).
type OptOut struct {
	Label string `json:"label"`
	// Allowed are usernames (a ServiceAccount is
	// system:serviceaccount:<namespace>:<name>) and, prefixed with "group:",
	// groups.
	Allowed []string `json:"allowed"`
	Site    string   `json:"site"`
}

// OptOutValue is the value of an opt-out label that opts out.
const OptOutValue = "true"

// GroupPrefix marks a group in OptOut.Allowed.
const GroupPrefix = "group:"

// Action is what an admission binding does.
type Action string

const (
	// Mutate bindings edit the object; they are served on the mutate path.
	Mutate Action = "mutate"
	// Validate bindings judge the object; they are served on the validate path.
	Validate Action = "validate"
)

func (a Action) String() string { return string(a) }

// Meta is what filters see of a request: the object's metadata (the old
// object's on DELETE) and the request's namespace.
type Meta struct {
	Namespace string
	Object    *metav1.PartialObjectMetadata
}

// Filter decides in process whether a binding runs for an object.
type Filter struct {
	// Describe says what it selects, e.g. `label app=web`.
	Describe string            `json:"describe"`
	Match    func(m Meta) bool `json:"-"`
	// CEL is the same test as an admission CEL expression on request and
	// object, for what the API server decides itself: a Finalize binding's
	// finalizer put on at admission (registration.FinalizerStamps).
	CEL string `json:"cel,omitempty"`
}

// Call is what a binding's handler is called with besides its objects.
type Call struct {
	Raw   *admissionv1.AdmissionRequest
	Store store.Store
}

// Binding is one mutation or validation of one kind of object.
type Binding struct {
	Capability string                  `json:"capability"`
	Name       string                  `json:"name"`
	Action     Action                  `json:"action"`
	GVK        schema.GroupVersionKind `json:"gvk"`
	Operations []admissionv1.Operation `json:"operations"`
	// Namespaces the capability is limited to; empty for all.
	Namespaces []string `json:"namespaces,omitempty"`
	Filters    []Filter `json:"filters,omitempty"`
	// Parent is the kind whose resource the binding's requests are for,
	// when that is not GVK: a Scale's Deployment. Zero for GVK itself.
	Parent schema.GroupVersionKind `json:"parent,omitempty"`
	// Plural is the resource of the kind the requests are for, when it is
	// not the one Kubernetes guesses (Module.Plurals).
	Plural string `json:"plural,omitempty"`
	// Subresource the binding's requests are for, such as
	// "ephemeralcontainers" of pods or "scale" of deployments; empty for the
	// resource itself.
	Subresource string `json:"subresource,omitempty"`
	// IfServed bindings are registered only while the API server serves
	// their kind: one on a CRD that may come later does not hold the
	// module's other webhooks back.
	IfServed bool `json:"ifServed,omitempty"`
	// FailClosed bindings are served by static webhooks with failurePolicy
	// Fail from install on, instead of being registered when ready.
	FailClosed bool `json:"failClosed"`
	// OptOut is the capability's opt-out label; empty when it has none.
	OptOut string `json:"optOut,omitempty"`
	// OptIn is the capability's opt-in label; empty when it has none.
	OptIn string `json:"optIn,omitempty"`
	// Mode is the capability's: what a validation's denial becomes.
	Mode Mode `json:"mode"`
	// JoinDenials is the capability's: its validations' denials are joined.
	JoinDenials bool `json:"joinDenials,omitempty"`
	// NamespacePolicies are the capability's (see Capability).
	NamespacePolicies []NamespacePolicy `json:"namespacePolicies,omitempty"`
	// FailOpenAfter is the capability's outage bound (see FailOpen); zero
	// when it has none.
	FailOpenAfter time.Duration `json:"failOpenAfter,omitempty"`
	Site          string        `json:"site"`

	// New returns an empty object of the binding's Go type.
	New func() client.Object `json:"-"`
	// Type is that Go type.
	Type reflect.Type `json:"-"`
	// Mutate edits obj (old is the object before an UPDATE).
	Mutate func(ctx context.Context, obj, old client.Object, call *Call) error `json:"-"`
	// Validate judges obj.
	Validate func(ctx context.Context, obj, old client.Object, call *Call) (admission.Verdict, error) `json:"-"`
}

// ID names the binding in logs and metrics: capability/name.
func (b *Binding) ID() string { return b.Capability + "/" + b.Name }

// StatusMetadata reports whether the binding also judges the writes through
// its kind's status subresource that change the object's labels or
// annotations: a binding on the resource itself that judges UPDATE, of a
// kind whose status lets them change (MetadataThroughStatus). A policy on
// an object's metadata that saw only the resource's own updates could be
// passed by through `pods/status`. Its webhook is sent those writes only: a
// status write that leaves the metadata as it was — the kubelet's, a
// controller's — never reaches the module.
func (b *Binding) StatusMetadata() bool {
	return statusMetadata(b.GVK, b.Parent, b.Subresource, b.Operations)
}

func statusMetadata(kind, parent schema.GroupVersionKind, subresource string, ops []admissionv1.Operation) bool {
	return parent.Empty() && subresource == "" && slices.Contains(ops, admissionv1.Update) && MetadataThroughStatus[kind.GroupKind()]
}

// MetadataThroughStatus are the built-in kinds whose status subresource the
// API server lets change labels or annotations (its status strategy keeps
// the spec, not the metadata; Deployments keep their labels, not their
// annotations). A custom resource's status cannot change its metadata, nor
// can that of the built-in kinds left out here.
var MetadataThroughStatus = map[schema.GroupKind]bool{
	{Kind: "Pod"}: true, {Kind: "Service"}: true, {Kind: "Node"}: true, {Kind: "Namespace"}: true,
	{Kind: "PersistentVolume"}: true, {Kind: "PersistentVolumeClaim"}: true,
	{Kind: "ReplicationController"}: true, {Kind: "ResourceQuota"}: true,
	{Group: "apps", Kind: "Deployment"}: true, {Group: "apps", Kind: "DaemonSet"}: true,
	{Group: "apps", Kind: "StatefulSet"}: true, {Group: "apps", Kind: "ReplicaSet"}: true,
	{Group: "batch", Kind: "Job"}: true, {Group: "batch", Kind: "CronJob"}: true,
	{Group: "networking.k8s.io", Kind: "Ingress"}: true, {Group: "policy", Kind: "PodDisruptionBudget"}: true,
	{Group: "autoscaling", Kind: "HorizontalPodAutoscaler"}:           true,
	{Group: "certificates.k8s.io", Kind: "CertificateSigningRequest"}: true,
}

// ResourceKind is the kind whose resource the binding's requests are for:
// Parent when set, else GVK.
func (b *Binding) ResourceKind() schema.GroupVersionKind {
	if !b.Parent.Empty() {
		return b.Parent
	}
	return b.GVK
}

// Resource names what the binding admits as kubectl does: "pods", or
// "deployments/scale" for a subresource (the kind's plural: see
// ResourceOf).
func (b *Binding) Resource() string {
	return withSubresource(b.ResourceKind(), b.Plural, b.Subresource)
}

func withSubresource(kind schema.GroupVersionKind, plural, subresource string) string {
	if subresource != "" {
		return resourceOf(kind, plural) + "/" + subresource
	}
	return resourceOf(kind, plural)
}

// Check is a requirement the API server checks itself, with no call to the
// module: a CEL expression every matching request must satisfy, shipped as a
// ValidatingAdmissionPolicy and its binding (see registration.Checks). It
// takes its capability's namespaces, opt-out label and mode, and holds from
// install on, whether the module runs or not.
type Check struct {
	Capability string                  `json:"capability"`
	Name       string                  `json:"name"`
	GVK        schema.GroupVersionKind `json:"gvk"`
	Operations []admissionv1.Operation `json:"operations"`
	// Namespaces the capability is limited to; empty for all.
	Namespaces []string `json:"namespaces,omitempty"`
	// Parent and Subresource are as a Binding's.
	Parent      schema.GroupVersionKind `json:"parent,omitempty"`
	Plural      string                  `json:"plural,omitempty"`
	Subresource string                  `json:"subresource,omitempty"`
	// OptOut is the capability's opt-out label; empty when it has none.
	OptOut string `json:"optOut,omitempty"`
	// OptIn is the capability's opt-in label; empty when it has none.
	OptIn string `json:"optIn,omitempty"`
	// Mode is the capability's: Enforce denies, Warn and Audit become the
	// policy binding's validation actions of those names.
	Mode Mode `json:"mode"`
	// Expression must be true for a request to pass; it sees object,
	// oldObject, request and namespaceObject as a ValidatingAdmissionPolicy
	// does. Message is the denial.
	Expression string `json:"expression"`
	Message    string `json:"message"`
	Site       string `json:"site"`
}

// ID names the check in messages: capability/name.
func (c *Check) ID() string { return c.Capability + "/" + c.Name }

// PolicyName names a ValidatingAdmissionPolicy the module ships, and its
// binding: <module>-<capability>-<name>, name being a check's or, for the
// guard of a capability's opt-out label, "opt-out".
func PolicyName(module, capability, name string) string {
	return module + "-" + capability + "-" + name
}

// OptOutGuard is the name PolicyName gives the guard of a capability's
// opt-out label.
const OptOutGuard = "opt-out"

// OptInGuard is the name PolicyName gives the guard of a capability's
// opt-in label.
const OptInGuard = "opt-in"

// ResourceKind is the kind whose resource the check's requests are for.
func (c *Check) ResourceKind() schema.GroupVersionKind {
	if !c.Parent.Empty() {
		return c.Parent
	}
	return c.GVK
}

// Resource names what the check admits as kubectl does.
func (c *Check) Resource() string { return withSubresource(c.ResourceKind(), c.Plural, c.Subresource) }

// StatusMetadata reports whether the check also holds on the writes through
// its kind's status subresource that change labels or annotations, as a
// Binding's StatusMetadata.
func (c *Check) StatusMetadata() bool {
	return statusMetadata(c.GVK, c.Parent, c.Subresource, c.Operations)
}

// StatusSubresource is the subresource whose writes StatusMetadata
// bindings and checks also judge.
const StatusSubresource = "status"

// NotStatus is a CEL expression, for a match condition, that holds when a
// request is not for a status subresource (a request with no subresource
// has no subResource field).
const NotStatus = `!has(request.subResource) || request.subResource != "` + StatusSubresource + `"`

// MetadataChanged is a CEL expression, for a match condition, that holds
// when a request changes the object's labels or annotations.
const MetadataChanged = `(has(object.metadata.labels) ? object.metadata.labels : {}) != (has(oldObject.metadata.labels) ? oldObject.metadata.labels : {}) || ` +
	`(has(object.metadata.annotations) ? object.metadata.annotations : {}) != (has(oldObject.metadata.annotations) ? oldObject.metadata.annotations : {})`
