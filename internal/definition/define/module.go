package define

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/clusters/kubeversion"
	"github.com/vigilkit/vigil/internal/definition/scheme"
	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/store"
)

// DefaultNamespace is the namespace of a module whose options name none.
const DefaultNamespace = "vigil-system"

// Module is a module as it is declared: what the facade's builders record,
// and the mistakes they found, until Resolve.
type Module struct {
	Name, Namespace, Version string
	Scheme                   *runtime.Scheme
	Policy                   admission.FailurePolicy
	Timeout                  time.Duration
	// Kubernetes is the oldest release the module targets: the CEL the
	// API server runs is compiled for it.
	Kubernetes kubeversion.Release

	mu           sync.Mutex
	errs         []error
	gates        []*Gate
	capabilities []spec.Capability
	bindings     []spec.Binding
	checks       []spec.Check
	watches      []spec.Watch
	schedules    []spec.Schedule
	listers      []Lister
	crds         []spec.CRD
	settings     []spec.Setting
	rules        []spec.Rule
	envs         []*Env
	mounts       []*Mount
	ruleRoles    map[int]ruleRoles // the pods a rule is for; every kind when absent
	trusted      []spec.TrustedNamespace
	provenance   *spec.Provenance
	hooks        spec.Hooks
	storeReady   []func(context.Context, store.Store)
	ignored      []string
	plurals      map[schema.GroupKind]plural
}

// SetIgnoredNamespaces records the namespaces the module keeps away from,
// as Options.IgnoredNamespaces gives them at site.
func (m *Module) SetIgnoredNamespaces(site string, namespaces []string) {
	for _, ns := range namespaces {
		if problems := validation.IsDNS1123Label(ns); len(problems) > 0 {
			m.Recordf(site, "Options.IgnoredNamespaces: %q: expected a namespace name: %s", ns, strings.Join(problems, "; "))
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ignored = slices.Compact(slices.Sorted(slices.Values(namespaces)))
}

// SetHooks records the functions run around every admission request.
func (m *Module) SetHooks(h spec.Hooks) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.hooks = h
}

// AddStoreReady records a function run once the module's Store has synced
// in each admission and watcher replica; a nil one is a mistake at site.
func (m *Module) AddStoreReady(site string, fn func(context.Context, store.Store)) {
	if fn == nil {
		m.Recordf(site, "OnStoreReady(nil): expected a function, as in m.OnStoreReady(func(ctx context.Context, s vigil.Store) { ... })")
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.storeReady = append(m.storeReady, fn)
}

// Lister is a lister as declared: what it reads, and how.
type Lister struct {
	Spec   spec.Lister
	Source *ListerSource
	Site   string
}

// imageVersion is the version `vigil image` stamps into the binary it
// builds (see internal/shipping/image.VersionVariable): the module's Version when
// its Options name none.
var imageVersion string

// New starts a module's definition, checking its options; mistakes are
// recorded at site, NewModule's call.
func New(site string, name, namespace string, s *runtime.Scheme, policy admission.FailurePolicy, timeout time.Duration, version string) *Module {
	if version == "" {
		version = imageVersion
	}
	m := &Module{Name: name, Namespace: namespace, Scheme: s, Policy: policy, Timeout: timeout, Version: version, Kubernetes: kubeversion.Oldest()}
	switch m.Policy {
	case "":
		m.Policy = admission.Fail
	case admission.Fail, admission.Ignore:
	default:
		m.Recordf(site, "Options.FailurePolicy %q: expected Fail or Ignore", m.Policy)
	}
	if m.Timeout == 0 {
		m.Timeout = 10 * time.Second
	}
	if m.Timeout < 3*time.Second || m.Timeout > 30*time.Second {
		m.Recordf(site, "Options.WebhookTimeout %s: expected 3s to 30s (the API server allows 1s to 30s, and bindings get 2s less)", m.Timeout)
	}
	if ns := os.Getenv(spec.EnvNamespace); ns != "" {
		m.Namespace = ns
	}
	if m.Namespace == "" {
		m.Namespace = DefaultNamespace
	}
	if m.Scheme == nil {
		m.Scheme = scheme.New()
	}
	if problems := validation.IsDNS1123Label(name); len(problems) > 0 {
		m.Recordf(site, "module name %q is not a valid DNS-1123 label (%s): use lower-case letters, digits and '-', like \"uds-core\"", name, strings.Join(problems, "; "))
	}
	if problems := validation.IsDNS1123Label(m.Namespace); len(problems) > 0 {
		from := "Options.Namespace"
		if os.Getenv(spec.EnvNamespace) != "" {
			from = spec.EnvNamespace
		}
		m.Recordf(site, "%s %q is not a valid namespace name (%s)", from, m.Namespace, strings.Join(problems, "; "))
	}
	return m
}

// SetMinKubernetes records the oldest Kubernetes release the module
// targets, as Options.MinKubernetes gives it ("1.35"); the oldest supported
// when empty.
func (m *Module) SetMinKubernetes(site, v string) {
	if v == "" {
		return
	}
	r, err := kubeversion.Parse(v)
	if err != nil {
		m.Recordf(site, "Options.MinKubernetes: %v", err)
		return
	}
	m.Kubernetes = r
}

// callerSkip is the number of frames between runtime.Caller in Caller and
// the author's call: Caller's own and the exported function's that calls it.
// It is the one stack-skip count of vigil.
const callerSkip = 2

// Caller is the file:line of the call of the exported function that calls
// it. Every public entry of the facade calls it once, directly, and passes
// the site down, so a helper layer between the entry and the check cannot
// shift it.
func Caller() string {
	if _, file, line, ok := goruntime.Caller(callerSkip); ok {
		return fmt.Sprintf("%s:%d", filepath.Base(file), line)
	}
	return ""
}

// Recordf records a definition mistake, prefixed with site, the file and
// line of the author's call that made it.
func (m *Module) Recordf(site, format string, args ...any) {
	err := fmt.Errorf(format, args...)
	if site != "" {
		err = fmt.Errorf("%s: %w", site, err)
	}
	m.mu.Lock()
	m.errs = append(m.errs, err)
	m.mu.Unlock()
}

// Check records err, if any, as Recordf would at site.
func (m *Module) Check(site string, err error) {
	if err != nil {
		m.Recordf(site, "%v", err)
	}
}

// AddGate records a gate declared at site.
func (m *Module) AddGate(g *Gate, site string) {
	g.Site = site
	m.mu.Lock()
	g.Index = len(m.gates)
	m.gates = append(m.gates, g)
	m.mu.Unlock()
}

// AddCapability records a capability, checking its name, its namespaces and
// its opt-out label; mistakes are recorded at c.Site, an opt-out's at
// OptOutLabel's call. It returns the capability as recorded: one limited to
// namespaces also governs those its FailurePolicyIn names (Pepr's
// additionalWebhooks), each with a webhook of its own.
func (m *Module) AddCapability(c spec.Capability) spec.Capability {
	site := c.Site
	if problems := validation.IsDNS1123Label(c.Name); len(problems) > 0 {
		m.Recordf(site, "capability name %q: %s", c.Name, strings.Join(problems, "; "))
	}
	for _, ns := range c.Namespaces {
		if problems := validation.IsDNS1123Label(ns); len(problems) > 0 {
			m.Recordf(site, "capability %s: InNamespaces(%q): not a namespace name: %s", c.Name, ns, strings.Join(problems, "; "))
		}
	}
	// A capability whose namespaces its webhooks all skip can never run.
	if skipped := spec.ExcludedNamespaces(m.Namespace, m.ignored...); len(c.Namespaces) > 0 &&
		!slices.ContainsFunc(c.Namespaces, func(ns string) bool { return !slices.Contains(skipped, ns) }) {
		m.Recordf(site, "capability %s: InNamespaces(%s): its webhooks never see these namespaces — a module's webhooks skip %s (its own namespace, kube-system, kube-node-lease and Options.IgnoredNamespaces), so it could never run; "+
			"limit it to the namespaces where the objects it judges are made, or run the module in another namespace",
			c.Name, strings.Join(c.Namespaces, ", "), strings.Join(skipped, ", "))
	}
	switch {
	case c.Mode == "":
		c.Mode = spec.Enforce
	case !c.Mode.Valid():
		m.Recordf(site, "capability %s: Mode(%q): expected ModeEnforce, ModeWarn or ModeAudit", c.Name, c.Mode)
	case c.FailClosed && c.Mode != spec.Enforce:
		m.Recordf(site, "capability %s: a fail-closed capability enforces: it cannot run in %s mode; drop FailClosed to roll it out in %s, or the mode", c.Name, c.Mode, c.Mode)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if o := c.OptOut; o != nil {
		for _, err := range checkOptOut(c, o, "an opt-out label", "OptOutLabel") {
			m.errs = append(m.errs, fmt.Errorf("%s: capability %s: OptOutLabel(%q): %w", o.Site, c.Name, o.Label, err))
		}
	}
	if o := c.OptIn; o != nil {
		for _, err := range checkOptOut(c, o, "an opt-in label", "OptInLabel") {
			m.errs = append(m.errs, fmt.Errorf("%s: capability %s: OptInLabel(%q): %w", o.Site, c.Name, o.Label, err))
		}
		if c.OptOut != nil {
			m.errs = append(m.errs, fmt.Errorf("%s: capability %s: OptInLabel(%q): the capability has an opt-out label (%s) already: a capability is opt-in or opt-out, not both; split it in two capabilities", o.Site, c.Name, o.Label, c.OptOut.Label))
		}
	}
	if f := c.FailOpen; f != nil {
		switch {
		case c.FailClosed:
			m.errs = append(m.errs, fmt.Errorf("%s: capability %s: FailOpenAfter(%s): a fail-closed capability never has an unguarded window: it cannot fail open; drop FailOpenAfter or FailClosed", f.Site, c.Name, f.After))
		case f.After <= 0:
			m.errs = append(m.errs, fmt.Errorf("%s: capability %s: FailOpenAfter(%s): the bound must be positive (a capability that must never fail open leaves it out)", f.Site, c.Name, f.After))
		}
	}
	seen := map[string]bool{}
	for _, np := range c.NamespacePolicies {
		if np.Policy != admission.Fail && np.Policy != admission.Ignore {
			m.errs = append(m.errs, fmt.Errorf("%s: capability %s: FailurePolicyIn(%q, ...): expected admission.Fail or admission.Ignore", np.Site, c.Name, np.Policy))
		}
		if len(np.Namespaces) == 0 {
			m.errs = append(m.errs, fmt.Errorf("%s: capability %s: FailurePolicyIn(%s): name the namespaces it applies in", np.Site, c.Name, np.Policy))
		}
		for _, ns := range np.Namespaces {
			if problems := validation.IsDNS1123Label(ns); len(problems) > 0 {
				m.errs = append(m.errs, fmt.Errorf("%s: capability %s: FailurePolicyIn(%s, %q): not a namespace name: %s", np.Site, c.Name, np.Policy, ns, strings.Join(problems, "; ")))
			}
			if seen[ns] {
				m.errs = append(m.errs, fmt.Errorf("%s: capability %s: FailurePolicyIn(%s, %q): namespace %s has a failure policy already", np.Site, c.Name, np.Policy, ns, ns))
			}
			seen[ns] = true
			if len(c.Namespaces) > 0 && !slices.Contains(c.Namespaces, ns) {
				c.Namespaces = append(slices.Clone(c.Namespaces), ns)
			}
		}
	}
	m.capabilities = append(m.capabilities, c)
	return c
}

// checkOptOut finds what is wrong with o, a capability's opt-out or opt-in
// label (what, as declared by option).
func checkOptOut(c spec.Capability, o *spec.OptOut, what, option string) []error {
	var errs []error
	if c.FailClosed {
		errs = append(errs, fmt.Errorf("a fail-closed capability checks everything it matches: it cannot have %s; drop %s or FailClosed", what, option))
	}
	if problems := validation.IsQualifiedName(o.Label); len(problems) > 0 {
		errs = append(errs, fmt.Errorf("not a label key: %s", strings.Join(problems, "; ")))
	}
	if prefix, _, ok := strings.Cut(o.Label, "/"); ok && (prefix == "kubernetes.io" || prefix == "k8s.io" || strings.HasSuffix(prefix, ".kubernetes.io") || strings.HasSuffix(prefix, ".k8s.io")) {
		errs = append(errs, fmt.Errorf("the prefix %s is reserved for Kubernetes: use one of your own, such as vigil.dev/ignore", prefix))
	}
	if len(o.Allowed) == 0 {
		errs = append(errs, errors.New("nobody is allowed to set the label: name the users, ServiceAccounts (system:serviceaccount:<namespace>:<name>) or groups (group:<name>) who may"))
	}
	for _, a := range o.Allowed {
		if strings.TrimSpace(a) == "" || strings.TrimSpace(strings.TrimPrefix(a, spec.GroupPrefix)) == "" || strings.TrimSpace(a) != a {
			errs = append(errs, fmt.Errorf("allowed %q: expected a username, or group:<name>", a))
		}
	}
	return errs
}

// AddBinding records an admission binding, named after its kind, action and
// place when it has no name, in its capability's mode (Enforce when the
// capability was not recorded); it returns the name.
func (m *Module) AddBinding(b spec.Binding) (name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if b.Name == "" {
		b.Name = fmt.Sprintf("%s-%s-%d", strings.ToLower(b.GVK.Kind), b.Action, len(m.bindings))
	}
	b.Mode = spec.Enforce
	for _, c := range m.capabilities {
		if c.Name == b.Capability && c.Mode.Valid() {
			b.Mode = c.Mode
		}
		if c.Name == b.Capability {
			b.JoinDenials, b.NamespacePolicies = c.JoinDenials, c.NamespacePolicies
		}
	}
	m.bindings = append(m.bindings, b)
	return b.Name
}

// AddCheck records a check, named as AddBinding names, in its capability's
// mode.
func (m *Module) AddCheck(c spec.Check) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c.Name == "" {
		c.Name = fmt.Sprintf("%s-require-%d", strings.ToLower(c.GVK.Kind), len(m.checks))
	}
	c.Mode = spec.Enforce
	for _, cp := range m.capabilities {
		if cp.Name == c.Capability && cp.Mode.Valid() {
			c.Mode = cp.Mode
		}
	}
	m.checks = append(m.checks, c)
}

// AddWatch records a watch binding, named as AddBinding names, with the
// finalizer it owns.
func (m *Module) AddWatch(w spec.Watch) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if w.Name == "" {
		w.Name = fmt.Sprintf("%s-%s-%d", strings.ToLower(w.GVK.Kind), w.Role, len(m.watches))
	}
	w.Finalizer = spec.Finalizer(m.Name, w.Capability, w.Name)
	m.watches = append(m.watches, w)
}

// AddSchedule records a schedule; a name used twice is a mistake.
func (m *Module) AddSchedule(s spec.Schedule) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, o := range m.schedules {
		if o.Name == s.Name {
			m.errs = append(m.errs, fmt.Errorf("%s: schedule %q is already declared at %s", s.Site, s.Name, o.Site))
		}
	}
	m.schedules = append(m.schedules, s)
}

// AddLister records a lister.
func (m *Module) AddLister(l Lister) {
	m.mu.Lock()
	m.listers = append(m.listers, l)
	m.mu.Unlock()
}

// ScopeLister limits the lister reading src to namespaces: its informer
// selects only them (unless another user of the type needs more), its RBAC is
// a Role in each, its barrier reads the same, and its reads see nothing else.
// No namespace, or an empty one, is a mistake recorded at site.
func (m *Module) ScopeLister(site string, src *ListerSource, namespaces []string) {
	if len(namespaces) == 0 || slices.Contains(namespaces, "") {
		m.Recordf(site, "Lister of %s: InNamespace(%q): expected one or more namespace names, none empty", src.GVK.Kind, namespaces)
		return
	}
	namespaces = slices.Clone(namespaces)
	slices.Sort(namespaces)
	namespaces = slices.Compact(namespaces)
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range m.listers {
		if m.listers[i].Source == src {
			m.listers[i].Spec.Select.Namespaces = namespaces
		}
	}
	src.Namespaces = namespaces
}

// AddRules records RBAC rules the author declared; first is the place of
// the first, for SetRuleRoles.
func (m *Module) AddRules(rules ...spec.Rule) (first int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	first = len(m.rules)
	m.rules = append(m.rules, rules...)
	return first
}

type ruleRoles struct {
	roles []string
	note  string
}

// SetRuleRoles gives the n rules from first only to the ServiceAccounts of
// the pods of roles (spec.Rule.Role values): each is resolved into one rule
// per role, note added to its why.
func (m *Module) SetRuleRoles(first, n int, roles []string, note string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ruleRoles == nil {
		m.ruleRoles = map[int]ruleRoles{}
	}
	for i := first; i < first+n && i < len(m.rules); i++ {
		m.ruleRoles[i] = ruleRoles{roles: roles, note: note}
	}
}

// resolveRules is the declared rules, one per role they are for.
func (m *Module) resolveRules() []spec.Rule {
	out := []spec.Rule{}
	for i, r := range m.rules {
		rr, ok := m.ruleRoles[i]
		if !ok {
			out = append(out, r)
			continue
		}
		r.Why += ", " + rr.note
		for _, role := range rr.roles {
			r.Role = role
			out = append(out, r)
		}
	}
	return out
}

// AddEnv records an environment variable declared at its Site.
func (m *Module) AddEnv(e *Env) {
	m.mu.Lock()
	m.envs = append(m.envs, e)
	m.mu.Unlock()
}

// AddMount records a volume declared at its Site.
func (m *Module) AddMount(mt *Mount) {
	m.mu.Lock()
	m.mounts = append(m.mounts, mt)
	m.mu.Unlock()
}

// DeclareEnv records the variable name, declared at site, and returns it
// for its builder; its mistakes are recorded at site.
func (m *Module) DeclareEnv(name, site string) *Env {
	e, err := NewEnv(name, site)
	m.Check(site, err)
	m.AddEnv(e)
	return e
}

// DeclareMount records the volume of the Secret or ConfigMap name at path,
// declared at site, and returns it for its builder; its mistakes are
// recorded at site.
func (m *Module) DeclareMount(kind, name, path, site string) *Mount {
	mt, err := NewMount(kind, name, path, site)
	m.Check(site, err)
	m.AddMount(mt)
	return mt
}

// DeclareRules records rule, declared at site with why, in namespaces
// (cluster-wide when none); it returns the place of the first rule and how
// many there are, for RulesFor.
func (m *Module) DeclareRules(why, site string, rule rbacv1.PolicyRule, namespaces []string) (first, n int) {
	rules, err := Rules(why, site, rule, namespaces)
	m.Check(site, err)
	return m.AddRules(rules...), len(rules)
}

// Verify reports every mistake recorded while the module was declared and
// every one only the whole definition shows, each with the call site that
// made it.
func (m *Module) Verify() error {
	errs := m.validate()
	resolved := m.Resolve()
	errs = append(errs, unrun(resolved)...)
	// A gate may not need its webhooks and checks to exempt more than the
	// one object it waits for.
	errs = append(errs, resolved.ExclusionProblems()...)
	return errors.Join(errs...)
}

func (m *Module) validate() []error {
	m.mu.Lock()
	defer m.mu.Unlock()
	errs := append([]error(nil), m.errs...)
	errs = append(errs, Validate(m.gates)...)
	errs = append(errs, validateConfig(m.envs, m.mounts, m.gates)...)
	capSites := map[string]string{}
	for _, c := range m.capabilities {
		if other, ok := capSites[c.Name]; ok {
			errs = append(errs, fmt.Errorf("%s: capability %q is already declared at %s", c.Site, c.Name, other))
		}
		capSites[c.Name] = c.Site
	}
	bindingSites := map[string]string{}
	for _, b := range m.bindings {
		if other, ok := bindingSites[b.ID()]; ok {
			errs = append(errs, fmt.Errorf("%s: binding %q of capability %q is already declared at %s: name it otherwise with Named", b.Site, b.Name, b.Capability, other))
		}
		bindingSites[b.ID()] = b.Site
	}
	// A check's name is its policy's too: no two of the module's policies
	// may share one, an opt-out label's guard included.
	policySites := map[string]string{}
	for _, c := range m.capabilities {
		if c.OptOut != nil {
			policySites[spec.PolicyName(m.Name, c.Name, spec.OptOutGuard)] = c.OptOut.Site + " (the guard of capability " + c.Name + "'s opt-out label)"
		}
		if c.OptIn != nil {
			policySites[spec.PolicyName(m.Name, c.Name, spec.OptInGuard)] = c.OptIn.Site + " (the guard of capability " + c.Name + "'s opt-in label)"
		}
	}
	for name, site := range m.trustPolicySites() {
		policySites[name] = site
	}
	for _, c := range m.checks {
		if other, ok := bindingSites[c.ID()]; ok {
			errs = append(errs, fmt.Errorf("%s: check %q of capability %q: the name is already declared at %s: name it otherwise with Named", c.Site, c.Name, c.Capability, other))
		} else if other, ok := policySites[spec.PolicyName(m.Name, c.Capability, c.Name)]; ok {
			errs = append(errs, fmt.Errorf("%s: check %q of capability %q: its ValidatingAdmissionPolicy would be named %s, as is the one declared at %s: name it otherwise with Named", c.Site, c.Name, c.Capability, spec.PolicyName(m.Name, c.Capability, c.Name), other))
		}
		bindingSites[c.ID()] = c.Site
		policySites[spec.PolicyName(m.Name, c.Capability, c.Name)] = c.Site
	}
	watchSites := map[string]string{}
	for _, w := range m.watches {
		if other, ok := watchSites[w.ID()]; ok {
			errs = append(errs, fmt.Errorf("%s: %s binding %q of capability %q is already declared at %s: name it otherwise with Named", w.Site, w.Role, w.Name, w.Capability, other))
		}
		watchSites[w.ID()] = w.Site
	}
	return errs
}

// Resolve turns the definition into the one value every role and tool reads.
// What is declared later is not in it.
func (m *Module) Resolve() *spec.Module {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := &spec.Module{
		SchemaVersion: spec.SchemaVersion,
		Name:          m.Name, Namespace: m.Namespace, Version: m.Version,
		FailurePolicy: m.Policy, TimeoutSeconds: int32(m.Timeout / time.Second),
		MinKubernetes: m.Kubernetes.String(),
		Hooks:         m.hooks,
		StoreReady:    slices.Clone(m.storeReady),
		Capabilities:  append([]spec.Capability{}, m.capabilities...),
		Bindings:      append([]spec.Binding{}, m.bindings...),
		Checks:        append([]spec.Check(nil), m.checks...),
		Watches:       append([]spec.Watch{}, m.watches...),
		Schedules:     append([]spec.Schedule{}, m.schedules...),
		Listers:       []spec.Lister{},
		CRDs:          append([]spec.CRD(nil), m.crds...),
		Settings:      append([]spec.Setting(nil), m.settings...),
		Rules:         m.resolveRules(),
		Scheme:        m.Scheme,
	}
	var gates []spec.Gate
	for _, g := range m.gates {
		gates = append(gates, g.Resolve())
	}
	out.Phases = spec.GroupPhases(gates)
	out.TrustedNamespaces = append([]spec.TrustedNamespace(nil), m.trusted...)
	out.Provenance = m.provenance
	out.Env, out.Mounts = resolveConfig(m.envs, m.mounts, m.gates)
	for _, l := range m.listers {
		out.Listers = append(out.Listers, l.Spec)
	}
	out.IgnoreNamespaces(m.ignored...)
	m.resolvePlurals(out)
	return out
}
