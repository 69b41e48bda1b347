package spec

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/store"
)

// SchemaVersion names the schema of a Module as `plan -o json` writes it.
// Change it when a field changes meaning or goes away.
const SchemaVersion = "vigil.dev/plan/v1"

// Module is a module's definition, resolved.
type Module struct {
	SchemaVersion string `json:"schemaVersion"`
	Name          string `json:"module"`
	Namespace     string `json:"namespace"`
	Version       string `json:"version,omitempty"`
	// FailurePolicy of the webhooks once enforced.
	FailurePolicy admission.FailurePolicy `json:"failurePolicy"`
	// TimeoutSeconds of the webhooks; bindings get two seconds less.
	TimeoutSeconds int32 `json:"timeoutSeconds"`
	// MinKubernetes is the oldest Kubernetes release the module targets,
	// as "1.33": the CEL the API server runs for it is compiled for that
	// release, and its manifests render for it or newer.
	MinKubernetes string `json:"minKubernetes"`
	// IgnoredNamespaces are kept away from the module: no webhook or check
	// sees them, no watch or audit acts on their objects.
	IgnoredNamespaces []string `json:"ignoredNamespaces,omitempty"`
	// Hooks run around every admission request the module answers.
	Hooks Hooks `json:"-"`
	// StoreReady run in every admission and watcher replica once its
	// module-wide Store has synced (OnStoreReady).
	StoreReady []func(ctx context.Context, s store.Store) `json:"-"`

	// Phases hold the startup gates, ascending, each phase with at least one.
	Phases []Phase `json:"phases"`
	// Capabilities group the bindings, in declaration order.
	Capabilities []Capability `json:"capabilities"`
	// Bindings are the admission bindings, in declaration order: mutations
	// run in this order.
	Bindings []Binding `json:"bindings"`
	// Checks are the requirements the API server checks itself, in
	// declaration order.
	Checks []Check `json:"checks,omitempty"`
	// Watches are the Watch, Reconcile and Finalize bindings.
	Watches []Watch `json:"watches"`
	// Schedules run on the watcher's active replica.
	Schedules []Schedule `json:"schedules"`
	// Settings are the values the definition took from the environment,
	// declared, in declaration order.
	Settings []Setting `json:"settings,omitempty"`
	// CRDs are the CustomResourceDefinitions the module ships: its own
	// kinds.
	CRDs []CRD `json:"crds,omitempty"`
	// Listers are the kinds read through live caches, by every role.
	Listers []Lister `json:"listers"`
	// Rules are the RBAC the author declared for what handlers call.
	Rules []Rule `json:"rules"`
	// Env are the environment variables the author declared, each for the
	// containers it names.
	Env []Env `json:"env,omitempty"`
	// Mounts are the Secret and ConfigMap volumes the author declared, each
	// for the containers it names.
	Mounts []Mount `json:"mounts,omitempty"`
	// TrustedNamespaces are the namespaces the module's install creates
	// and guards, in declaration order.
	TrustedNamespaces []TrustedNamespace `json:"trustedNamespaces,omitempty"`
	// Provenance, when set, makes the module's install record who creates
	// each Namespace.
	Provenance *Provenance `json:"namespaceProvenance,omitempty"`

	// Scheme resolves the module's Go types.
	Scheme *runtime.Scheme `json:"-"`
	// Plurals are the resources of the module's kinds whose plural is not
	// the one Kubernetes guesses (KindWithPlural, a CRD the module ships).
	Plurals map[schema.GroupKind]string `json:"-"`
}

// Phase is one phase of gates: one init container.
type Phase struct {
	Phase int `json:"phase"`
	// InitContainer runs the phase in the admission pod.
	InitContainer string `json:"initContainer"`
	Gates         []Gate `json:"gates"`
}

// InitContainerName is the init container that runs a phase's gates.
func InitContainerName(phase int) string { return fmt.Sprintf("gate-phase-%d", phase) }

// GroupPhases sorts gates into phases, ascending; gates keep their order.
func GroupPhases(gates []Gate) []Phase {
	byPhase := map[int][]Gate{}
	for _, g := range gates {
		byPhase[g.Phase] = append(byPhase[g.Phase], g)
	}
	phases := []Phase{}
	for n, gs := range byPhase {
		phases = append(phases, Phase{Phase: n, InitContainer: InitContainerName(n), Gates: gs})
	}
	sort.Slice(phases, func(i, j int) bool { return phases[i].Phase < phases[j].Phase })
	return phases
}

// Gates are every gate, phase by phase.
func (m *Module) Gates() []*Gate {
	var out []*Gate
	for i := range m.Phases {
		for j := range m.Phases[i].Gates {
			out = append(out, &m.Phases[i].Gates[j])
		}
	}
	return out
}

// Phase is the phase numbered n, or nil when no gate runs in it.
func (m *Module) Phase(n int) *Phase {
	for i := range m.Phases {
		if m.Phases[i].Phase == n {
			return &m.Phases[i]
		}
	}
	return nil
}

// ChecksOf are the checks of one capability.
func (m *Module) ChecksOf(capability string) []Check {
	var out []Check
	for _, c := range m.Checks {
		if c.Capability == capability {
			out = append(out, c)
		}
	}
	return out
}

// BindingsOf are the admission bindings of one capability.
func (m *Module) BindingsOf(capability string) []Binding {
	var out []Binding
	for _, b := range m.Bindings {
		if b.Capability == capability {
			out = append(out, b)
		}
	}
	return out
}

// BindingTimeout bounds the admission bindings of one request, and a
// recheck's round trip: two seconds below the webhooks' timeoutSeconds, so
// the API server always hears the failure policy's answer rather than its
// own timeout.
func (m *Module) BindingTimeout() time.Duration {
	return time.Duration(m.TimeoutSeconds)*time.Second - 2*time.Second
}

// HasAdmission reports whether the module runs an admission pod: it has
// gates or admission bindings.
func (m *Module) HasAdmission() bool { return len(m.Phases) > 0 || len(m.Bindings) > 0 }

// HasWatcher reports whether the module runs a watcher pod: it has watches,
// schedules, validations to audit, or a capability that fails open after an
// outage (the watcher's leader watches for outages).
func (m *Module) HasWatcher() bool {
	return len(m.Watches) > 0 || len(m.Schedules) > 0 || m.Audited() || m.FailsOpen()
}

// FailsOpen reports whether a capability declared an outage bound
// (FailOpenAfter).
func (m *Module) FailsOpen() bool {
	for _, b := range m.Bindings {
		if b.FailOpenAfter > 0 {
			return true
		}
	}
	return false
}

// Audited reports whether the watcher audits existing objects: the module
// has validations registered when ready (not fail-closed) of objects (not of
// a subresource, such as a Scale).
func (m *Module) Audited() bool {
	for _, b := range m.Bindings {
		if Audited(b) {
			return true
		}
	}
	return false
}

// AuditsMutations reports whether the audit looks for mutations skipped
// while failed open: whether a mutation has an outage bound.
func (m *Module) AuditsMutations() bool {
	for _, b := range m.Bindings {
		if b.Action == Mutate && Audited(b) {
			return true
		}
	}
	return false
}

// Audited reports whether the audit runs binding b over existing objects:
// validations that were not enforced from install on, and mutations with an
// outage bound (over the objects created while they were failed open).
func Audited(b Binding) bool {
	if b.FailClosed || b.Subresource != "" {
		return false
	}
	return b.Action == Validate || (b.Action == Mutate && b.FailOpenAfter > 0)
}

// Decode reads a Module as `plan -o json` wrote it.
func Decode(data []byte) (*Module, error) {
	var m Module
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("expected the output of `<module> plan -o json`: %w", err)
	}
	if m.SchemaVersion != SchemaVersion {
		return nil, fmt.Errorf("expected the output of `<module> plan -o json` with schemaVersion %q, got %q: rebuild that module with this version of vigil", SchemaVersion, m.SchemaVersion)
	}
	if m.Name == "" {
		return nil, fmt.Errorf("no module in it: expected the output of `<module> plan -o json`")
	}
	return &m, nil
}

// Hooks are the author's functions around every admission request the
// module answers: Before as it arrives, After once it is answered, with the
// answer and how long it took. Either may be nil.
type Hooks struct {
	Before func(ctx context.Context, req *admissionv1.AdmissionRequest)
	After  func(ctx context.Context, req *admissionv1.AdmissionRequest, resp *admissionv1.AdmissionResponse, took time.Duration)
}
