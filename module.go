package vigil

import (
	"errors"
	"fmt"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/define"
	"github.com/vigilkit/vigil/internal/scheme"
	"github.com/vigilkit/vigil/internal/spec"
)

// Options configure a module.
type Options struct {
	// Namespace the module runs in; "vigil-system" when empty.
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
	// version's webhook registration is never overwritten by an older one.
	Version string
	// WebhookTimeout is the webhooks' timeoutSeconds; 10s when zero. Bindings
	// are given two seconds less, so the API server always hears the failure
	// policy's answer rather than its own timeout.
	WebhookTimeout time.Duration
}

// DefaultNamespace is the namespace of a module whose Options name none.
const DefaultNamespace = "vigil-system"

// Module is the definition of a module: what it waits for, admits, watches and
// stores. Build it with NewModule and the entry functions of this package.
type Module struct {
	name      string
	namespace string
	scheme    *runtime.Scheme
	policy    admission.FailurePolicy
	timeout   time.Duration
	version   string

	mu           sync.Mutex
	errs         []error
	gates        []*define.Gate
	capabilities []*Capability
	bindings     []spec.Binding
	watches      []spec.Watch
	schedules    []spec.Schedule
	listers      []listerDef
	rules        []spec.Rule

	// handoffDir is the running admission role's handoff folder, for
	// GateResult.
	handoffDir atomic.Value
}

// NewModule starts the definition of the module called name, which must be a
// DNS-1123 label: it names the module's Kubernetes objects.
func NewModule(name string, opts Options) *Module {
	m := &Module{name: name, namespace: opts.Namespace, scheme: opts.Scheme, policy: opts.FailurePolicy, timeout: opts.WebhookTimeout, version: opts.Version}
	switch m.policy {
	case "":
		m.policy = admission.Fail
	case admission.Fail, admission.Ignore:
	default:
		m.recordf(1, "Options.FailurePolicy %q: expected Fail or Ignore", m.policy)
	}
	if m.timeout == 0 {
		m.timeout = 10 * time.Second
	}
	if m.timeout < 3*time.Second || m.timeout > 30*time.Second {
		m.recordf(1, "Options.WebhookTimeout %s: expected 3s to 30s (the API server allows 1s to 30s, and bindings get 2s less)", m.timeout)
	}
	if m.namespace == "" {
		m.namespace = DefaultNamespace
	}
	if m.scheme == nil {
		m.scheme = scheme.New()
	}
	if problems := validation.IsDNS1123Label(name); len(problems) > 0 {
		m.recordf(1, "module name %q is not a valid DNS-1123 label (%s): use lower-case letters, digits and '-', like \"uds-core\"", name, strings.Join(problems, "; "))
	}
	if problems := validation.IsDNS1123Label(m.namespace); len(problems) > 0 {
		m.recordf(1, "Options.Namespace %q is not a valid namespace name (%s)", m.namespace, strings.Join(problems, "; "))
	}
	return m
}

// Name is the module's name.
func (m *Module) Name() string { return m.name }

// Namespace is the namespace the module runs in.
func (m *Module) Namespace() string { return m.namespace }

// Validate reports every mistake recorded while the module was declared and
// every one only the whole definition shows, each with the call site that
// made it.
func (m *Module) Validate() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	errs := append([]error(nil), m.errs...)
	errs = append(errs, define.Validate(m.gates)...)
	capSites := map[string]string{}
	for _, c := range m.capabilities {
		if other, ok := capSites[c.name]; ok {
			errs = append(errs, fmt.Errorf("%s: capability %q is already declared at %s", c.site, c.name, other))
		}
		capSites[c.name] = c.site
	}
	bindingSites := map[string]string{}
	for _, b := range m.bindings {
		if other, ok := bindingSites[b.ID()]; ok {
			errs = append(errs, fmt.Errorf("%s: binding %q of capability %q is already declared at %s: name it otherwise with Named", b.Site, b.Name, b.Capability, other))
		}
		bindingSites[b.ID()] = b.Site
	}
	watchSites := map[string]string{}
	for _, w := range m.watches {
		if other, ok := watchSites[w.ID()]; ok {
			errs = append(errs, fmt.Errorf("%s: %s binding %q of capability %q is already declared at %s: name it otherwise with Named", w.Site, w.Role, w.Name, w.Capability, other))
		}
		watchSites[w.ID()] = w.Site
	}
	return errors.Join(errs...)
}

// recordf records a definition error, prefixed with the file and line of the
// caller skip frames above recordf's caller.
func (m *Module) recordf(skip int, format string, args ...any) {
	err := fmt.Errorf(format, args...)
	if site := callSite(skip + 1); site != "" {
		err = fmt.Errorf("%s: %w", site, err)
	}
	m.mu.Lock()
	m.errs = append(m.errs, err)
	m.mu.Unlock()
}

// check records err, if any, as a definition mistake at the caller skip
// frames above check's caller.
func (m *Module) check(skip int, err error) {
	if err != nil {
		m.recordf(skip+1, "%v", err)
	}
}

// addGate records a new gate declared at the caller's caller.
func (m *Module) addGate(g *define.Gate) {
	g.Site = callSite(2)
	m.mu.Lock()
	g.Index = len(m.gates)
	m.gates = append(m.gates, g)
	m.mu.Unlock()
}

// callSite is the file:line of the caller skip frames above callSite's caller.
func callSite(skip int) string {
	if _, file, line, ok := goruntime.Caller(skip + 1); ok {
		return fmt.Sprintf("%s:%d", filepath.Base(file), line)
	}
	return ""
}

// resolve turns the definition into the one value every role and tool reads.
// Call it once the module is declared: what is declared later is not in it.
func (m *Module) resolve() *spec.Module {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := &spec.Module{
		SchemaVersion: spec.SchemaVersion,
		Name:          m.name, Namespace: m.namespace, Version: m.version,
		FailurePolicy: m.policy, TimeoutSeconds: int32(m.timeout / time.Second),
		Capabilities: []spec.Capability{},
		Bindings:     append([]spec.Binding{}, m.bindings...),
		Watches:      append([]spec.Watch{}, m.watches...),
		Schedules:    append([]spec.Schedule{}, m.schedules...),
		Listers:      []spec.Lister{},
		Rules:        append([]spec.Rule{}, m.rules...),
		Scheme:       m.scheme,
		Hooks: spec.Hooks{
			UseCache:   m.useCache,
			HandoffDir: func(dir string) { m.handoffDir.Store(dir) },
		},
	}
	var gates []spec.Gate
	for _, g := range m.gates {
		gates = append(gates, g.Resolve())
	}
	out.Phases = spec.GroupPhases(gates)
	for _, c := range m.capabilities {
		out.Capabilities = append(out.Capabilities, spec.Capability{Name: c.name, FailClosed: c.failClosed, Namespaces: c.namespaces, Site: c.site})
	}
	for _, l := range m.listers {
		out.Listers = append(out.Listers, l.user)
	}
	return out
}
