package define

import (
	"regexp"
	"slices"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/internal/definition/spec"
)

// Binding is an admission or watch declaration as it is being built: the
// facade's AdmissionBuilder and WatchBuilder record every call into it, and
// it checks each as it is made. Every method that can find a mistake takes
// site, the author's call.
type Binding struct {
	m       *Module
	Cap     spec.Capability
	Proto   client.Object
	GVK     schema.GroupVersionKind
	Ops     []admissionv1.Operation
	Filters []spec.Filter
	Name    string
	Site    string
	// Parent and Subresource name a subresource's requests: see Subresource
	// and WhenScaled.
	Parent      schema.GroupVersionKind
	Subresource string
	// IfServed: registered only while its kind is served.
	IfServed bool
	// templates, when set, makes a Pod validation judge workloads' pod
	// templates too (SetPodTemplates, at templatesSite).
	templates     TemplateMode
	templatesSite string

	// backoff is a Reconcile's or Finalize's retry back-off, when declared.
	backoff     *spec.Backoff
	backoffSite string

	// What a watch could select on the server: see watcher.Agree.
	inNamespaces []string
	Labels       map[string]*string
	SelName      string
}

// NewBinding starts a declaration of capability c on objects of proto's
// type, made by entry (When, Watch) at site.
func NewBinding(m *Module, c spec.Capability, proto client.Object, entry, site string) *Binding {
	b := &Binding{m: m, Cap: c, Proto: proto, Site: site}
	gvk, err := m.GVKOf(site, proto)
	if err != nil {
		m.Recordf(site, "%s: %v", entry, err)
	}
	b.GVK = gvk
	return b
}

// NewScaleBinding starts a declaration on the scale requests of parent's
// resource, made by WhenScaled at site.
func NewScaleBinding(m *Module, c spec.Capability, parent client.Object, site string) *Binding {
	b := NewBinding(m, c, &autoscalingv1.Scale{}, "WhenScaled", site)
	b.Subresource = "scale"
	var err error
	if b.Parent, err = m.GVKOf(site, parent); err != nil {
		m.Recordf(site, "WhenScaled: %v", err)
	}
	return b
}

// SetSubresource binds to a subresource whose requests carry the kind itself.
func (b *Binding) SetSubresource(site, name string) {
	if name == "" || name == "scale" || strings.Contains(name, "/") {
		b.m.Recordf(site, "Subresource(%q): expected a subresource whose requests carry %s, such as \"ephemeralcontainers\" or \"status\"; for scale use WhenScaled", name, b.GVK.Kind)
		return
	}
	b.Subresource = name
}

// On adds operations.
func (b *Binding) On(ops ...admissionv1.Operation) { b.Ops = append(b.Ops, ops...) }

// InNamespace limits the binding to the namespaces. A namespace its
// capability does not govern is a dead binding there, refused at site.
func (b *Binding) InNamespace(site string, namespaces []string) {
	for _, ns := range namespaces {
		if len(b.Cap.Namespaces) > 0 && !slices.Contains(b.Cap.Namespaces, ns) {
			b.m.Recordf(site, "InNamespace(%q): capability %s governs only namespaces %s, so the binding would never run in %s; "+
				"add %q to the capability's vigil.InNamespaces, or drop it here", ns, b.Cap.Name, strings.Join(b.Cap.Namespaces, ", "), ns, ns)
		}
	}
	b.Filters = append(b.Filters, spec.InNamespace(namespaces...))
	b.inNamespaces = append(b.inNamespaces, namespaces...)
}

// InNamespaceRegex limits the binding to the namespaces matching expr. An
// expression that matches none of the namespaces its capability governs is a
// dead binding, refused at site.
func (b *Binding) InNamespaceRegex(site, expr string) {
	re := b.compile(site, "InNamespaceRegex", expr)
	if re == nil {
		return
	}
	if len(b.Cap.Namespaces) > 0 && !slices.ContainsFunc(b.Cap.Namespaces, re.MatchString) {
		b.m.Recordf(site, "InNamespaceRegex(%q): matches none of the namespaces capability %s governs (%s), so the binding would never run; "+
			"widen the capability's vigil.InNamespaces, or the expression", expr, b.Cap.Name, strings.Join(b.Cap.Namespaces, ", "))
	}
	b.Filters = append(b.Filters, spec.InNamespaceRegex(re))
}

// WithName limits the binding to the object of this name.
func (b *Binding) WithName(name string) {
	b.Filters = append(b.Filters, spec.WithName(name))
	b.SelName = name
}

// WithNameRegex limits the binding to the objects whose name matches expr.
func (b *Binding) WithNameRegex(site, expr string) {
	if re := b.compile(site, "WithNameRegex", expr); re != nil {
		b.Filters = append(b.Filters, spec.WithNameRegex(re))
	}
}

// WithLabel limits the binding to objects with the label, with the value
// when value is not nil.
func (b *Binding) WithLabel(key string, value *string) {
	if value == nil {
		b.Filters = append(b.Filters, spec.WithLabel(key))
	} else {
		b.Filters = append(b.Filters, spec.WithLabel(key, *value))
	}
	if b.Labels == nil {
		b.Labels = map[string]*string{}
	}
	b.Labels[key] = value
}

// WithAnnotation limits the binding to objects with the annotation, with the
// value when value is not nil.
func (b *Binding) WithAnnotation(key string, value *string) {
	if value == nil {
		b.Filters = append(b.Filters, spec.WithAnnotation(key))
		return
	}
	b.Filters = append(b.Filters, spec.WithAnnotation(key, *value))
}

// WhileTerminating limits the binding to objects being deleted.
func (b *Binding) WhileTerminating() {
	b.Filters = append(b.Filters, spec.WithDeletionTimestamp())
}

// SetName names the binding.
// SetBackoff declares how the binding's failures are retried.
func (b *Binding) SetBackoff(site string, initial, maxDelay time.Duration) {
	switch {
	case initial <= 0:
		b.m.Recordf(site, "Backoff(%s, %s): expected a first delay above 0, as in Backoff(100*time.Millisecond, time.Minute)", initial, maxDelay)
	case maxDelay < initial:
		b.m.Recordf(site, "Backoff(%s, %s): the longest delay is shorter than the first: expected max >= initial", initial, maxDelay)
	}
	b.backoff, b.backoffSite = &spec.Backoff{Initial: initial, Max: maxDelay}, site
}

func (b *Binding) SetName(site, name string) {
	if problems := validation.IsDNS1123Label(name); len(problems) > 0 {
		b.m.Recordf(site, "binding name %q: %s", name, strings.Join(problems, "; "))
	}
	b.Name = name
}

func (b *Binding) compile(site, method, expr string) *regexp.Regexp {
	re, err := regexp.Compile(expr)
	if err != nil {
		b.m.Recordf(site, "%s(%q): expected a Go regular expression: %v", method, expr, err)
		return nil
	}
	return re
}

// Namespaces are the namespaces a binding is limited to: its own
// InNamespace, else its capability's; none means all.
func (b *Binding) Namespaces() []string {
	if len(b.inNamespaces) > 0 {
		return b.inNamespaces
	}
	return b.Cap.Namespaces
}

// AddAdmission records binding, a Mutate or Validate (action) declared at
// site, with what the declaration gathered.
func (b *Binding) AddAdmission(site string, binding spec.Binding, action string) {
	if len(b.Ops) == 0 {
		b.m.Recordf(site, "When(%s).%s: no operation: call IsCreated, IsUpdated, IsCreatedOrUpdated or IsDeleted first", b.GVK.Kind, strings.ToUpper(action[:1])+action[1:])
	}
	binding.Capability = b.Cap.Name
	binding.Operations = b.Ops
	binding.Namespaces = b.Cap.Namespaces
	binding.FailClosed = b.Cap.FailClosed
	binding.OptOut = b.Cap.OptOutLabel()
	binding.OptIn = b.Cap.OptInLabel()
	binding.FailOpenAfter = b.Cap.FailOpenAfter()
	binding.Filters = b.Filters
	binding.Parent, binding.Subresource = b.Parent, b.Subresource
	binding.IfServed = b.IfServed
	binding.Name = b.Name
	binding.Site = b.Site
	binding.Name = b.m.AddBinding(binding)
	if b.templates != "" {
		if binding.Action != spec.Validate {
			b.m.Recordf(b.templatesSite, "When(Pod).PodTemplates: pod templates are judged by a validation, not a %s", binding.Action)
			return
		}
		for _, t := range b.templateBindings(binding) {
			b.m.AddBinding(t)
		}
	}
}
