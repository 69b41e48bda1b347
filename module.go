package vigil

import (
	"context"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/definition/define"
	"github.com/vigilkit/vigil/internal/definition/spec"
)

// Options configure a module.
type Options struct {
	// Namespace the module runs in; "vigil-system" when empty. VIGIL_NAMESPACE
	// wins over it: set it when rendering (VIGIL_NAMESPACE=apps-policy
	// <module> manifests) to install the module elsewhere, and every
	// container gets it from its pod's namespace, so each role resolves the
	// definition that was rendered. Write m.Namespace() wherever the module's
	// own namespace is meant — a gate's InNamespace, a lister's, an RBAC
	// rule's — and it follows.
	Namespace string
	// Scheme the module's Go types are registered in, so that a prototype
	// such as &udsv1.ClusterConfig{} resolves to its group, version and kind;
	// client-go's types and apiextensions/v1 when nil.
	Scheme *runtime.Scheme
	// FailurePolicy of the module's webhooks: how a binding that fails, panics
	// or runs out of time is answered. Fail (deny, naming the binding) when
	// empty; Ignore allows with a warning.
	FailurePolicy admission.FailurePolicy
	// Version of the module, as semantic version: during a rollout, a newer
	// version's registration wins; older replicas allow what they do not serve.
	// When empty, the version `vigil image` stamped into the binary (its
	// --version, or git describe's, when either is a semantic version);
	// 0.0.0 for a binary built otherwise.
	Version string
	// WebhookTimeout is the webhooks' timeoutSeconds; 10s when zero. Bindings
	// are given two seconds less, so the API server always hears the failure
	// policy's answer rather than its own timeout.
	WebhookTimeout time.Duration
	// MinKubernetes is the oldest Kubernetes release the module runs on, as
	// "1.35": one of the releases vigil supports (1.33 to 1.37), the oldest
	// of them when empty. The CEL the API server runs for the module
	// (Require) is compiled for it, so an expression that release refuses
	// is a definition mistake; manifests and charts render for it or newer.
	MinKubernetes string
	// IgnoredNamespaces are kept away from the module, as Pepr's
	// alwaysIgnore.namespaces: no webhook or check of it sees their
	// objects (nor the Namespaces themselves), no watch, Reconcile,
	// Finalize or audit acts on them. The webhooks select them out by
	// kubernetes.io/metadata.name, which the API server sets to each
	// namespace's own name: no tenant can ignore her own namespace. Its
	// own namespace, kube-system and kube-node-lease are always ignored. An
	// install adds more: the chart's ignoredNamespaces value, or `manifests
	// --ignore-namespace`.
	IgnoredNamespaces []string
	// Hooks run around every admission request the module answers, for the
	// author's own metrics, logs and traces (Pepr's beforeHook and
	// afterHook).
	Hooks AdmissionHooks
}

// AdmissionHooks are functions run around every admission request the module
// answers, in the admission role. Before runs as the request arrives, before
// any binding, on the request's own goroutine: its time counts against the
// webhook's deadline. After runs once the answer is sent, with the answer
// (allowed, the denial's status, warnings, the patch) and how long the
// module took. Either may be nil. They see every request — dry runs, requests
// the module does not serve and answers its failure policy gives — and must
// not change them; a panic in one is logged, and the request is answered as
// if it had not run. Their context gives them LoggerFrom and ClientFrom. They
// run in the admission role, not in vigiltest's in-process Review.
type AdmissionHooks struct {
	Before func(ctx context.Context, req *admissionv1.AdmissionRequest)
	After  func(ctx context.Context, req *admissionv1.AdmissionRequest, resp *admissionv1.AdmissionResponse, took time.Duration)
}

// DefaultNamespace is the namespace of a module whose Options name none.
const DefaultNamespace = define.DefaultNamespace

// Module is the definition of a module: what it waits for, admits, watches and
// stores. Build it with NewModule and the entry functions of this package.
type Module struct {
	d *define.Module
}

// NewModule starts the definition of the module called name, which must be a
// DNS-1123 label: it names the module's Kubernetes objects.
func NewModule(name string, opts Options) *Module {
	site := define.Caller()
	d := define.New(site, name, opts.Namespace, opts.Scheme, opts.FailurePolicy, opts.WebhookTimeout, opts.Version)
	d.SetMinKubernetes(site, opts.MinKubernetes)
	d.SetHooks(spec.Hooks{Before: opts.Hooks.Before, After: opts.Hooks.After})
	d.SetIgnoredNamespaces(site, opts.IgnoredNamespaces)
	return &Module{d: d}
}

// Name is the module's name.
func (m *Module) Name() string { return m.d.Name }

// Namespace is the namespace the module runs in.
func (m *Module) Namespace() string { return m.d.Namespace }

// Verify reports every mistake recorded while the module was declared and
// every one only the whole definition shows, each with the call site that
// made it. (Validate is an admission declaration: When(...).Validate(fn).)
func (m *Module) Verify() error { return m.d.Verify() }

func init() {
	define.SetFacade(func(module any) (*define.Module, bool) {
		m, ok := module.(*Module)
		if !ok || m == nil {
			return nil, false
		}
		return m.d, true
	})
}
