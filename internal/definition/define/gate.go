package define

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/vigilkit/vigil/gate"
	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/store"
)

// Gate is a gate as it is declared, whatever the type parameters of its
// builder.
type Gate struct {
	Site  string
	Index int // declaration order in the module
	// Named is the name given with Named; see ID.
	Named    string
	Phase    int
	Timeout  time.Duration
	Optional bool

	// An object gate waits on Wait; a sample gate samples.
	Wait      spec.Wait
	labelReqs []labels.Requirement
	fieldSet  fields.Set
	Sample    *Sample

	Creates []spec.Object

	// outcome is how the gate was completed, e.g. "ToBe"; empty until then.
	outcome, outcomeSite string
	// callback names the method that set the author's callback, and where.
	callback, callbackSite string

	// Finish turns what the wait found into the handoff result, running the
	// author's callback.
	Finish func(ctx context.Context, objs []*unstructured.Unstructured, s store.Store) (any, error)
	// Fallback produces the result when the timeout expires; nil when none.
	Fallback func(ctx context.Context, s store.Store) (any, error)
}

// Sample is the sampling half of a Sample gate.
type Sample struct {
	Every, SampleTimeout time.Duration
	// Run samples until the sample matches, reporting what it saw, runs the
	// callback and returns the matching sample.
	Run func(ctx context.Context, seen func(found bool, what string), s store.Store) (any, error)
}

// SetOutcome sets how the gate is done; a gate has one outcome. A condition
// that cannot apply to the gate's kind is a mistake.
func (g *Gate) SetOutcome(how, site string, cond gate.Cond) error {
	if g.outcome != "" {
		return fmt.Errorf("gate %s: %s after %s (%s): a gate has one outcome; declare another gate for another one", g.ID(), how, g.outcome, g.outcomeSite)
	}
	g.outcome, g.outcomeSite = how, site
	if cond == nil {
		return nil
	}
	g.Wait.Cond = cond
	if v, ok := cond.(gate.Validator); ok && g.Sample == nil {
		if err := v.Validate(g.Wait.GVK); err != nil {
			return fmt.Errorf("gate %s: %v", g.ID(), err)
		}
	}
	return nil
}

// SetCallback records that how (ToBeCreated or Then) set the gate's
// callback at site; a gate has one callback, and a second is a mistake
// naming both call sites.
func (g *Gate) SetCallback(how, site string) error {
	if g.callback != "" {
		return fmt.Errorf("gate %s: %s sets a callback, but %s at %s already set one: a gate has one callback; do both things in it", g.ID(), how, g.callback, g.callbackSite)
	}
	g.callback, g.callbackSite = how, site
	return nil
}

// SetPhase runs the gate in phase n.
func (g *Gate) SetPhase(n int) error {
	if n < 0 {
		return fmt.Errorf("gate %s: InPhase(%d): expected a phase of 0 or more", g.ID(), n)
	}
	g.Phase = n
	return nil
}

// SetName names the gate.
func (g *Gate) SetName(name string) error {
	if problems := validation.IsDNS1123Subdomain(name); len(problems) > 0 {
		return fmt.Errorf("gate name %q: expected lower-case letters, digits, '-' and '.': %s", name, strings.Join(problems, "; "))
	}
	g.Named = name
	return nil
}

// SetTimeout bounds the wait.
func (g *Gate) SetTimeout(d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("gate %s: Timeout(%s): expected a positive duration; leave it out to wait without limit", g.ID(), d)
	}
	g.Timeout = d
	return nil
}

// SetNamespace looks in the namespace.
func (g *Gate) SetNamespace(ns string) error {
	if problems := validation.IsDNS1123Label(ns); len(problems) > 0 {
		return fmt.Errorf("gate %s: InNamespace(%q): not a namespace name: %s", g.ID(), ns, strings.Join(problems, "; "))
	}
	g.Wait.Namespace = ns
	return nil
}

// AddLabel selects objects that have the label, with the value when value
// is not nil; method names the declaration, WithLabel or WithLabelValue.
func (g *Gate) AddLabel(method, key string, value *string) error {
	var req *labels.Requirement
	var err error
	if value == nil {
		req, err = labels.NewRequirement(key, selection.Exists, nil)
	} else {
		req, err = labels.NewRequirement(key, selection.Equals, []string{*value})
	}
	if err != nil {
		return fmt.Errorf("gate %s: %s(%q): %v", g.ID(), method, key, err)
	}
	g.labelReqs = append(g.labelReqs, *req)
	return nil
}

// AddField selects objects by a field the API server can select on.
func (g *Gate) AddField(key, value string) {
	if g.fieldSet == nil {
		g.fieldSet = fields.Set{}
	}
	g.fieldSet[key] = value
}

// Describe says what the gate waits for.
func (g *Gate) Describe() string {
	if g.Sample != nil {
		return fmt.Sprintf("a sample every %s to match", g.Sample.Every)
	}
	return g.WaitSpec().Describe()
}

// WaitSpec is the spec the engine runs.
func (g *Gate) WaitSpec() spec.Wait {
	s := g.Wait
	if len(g.labelReqs) > 0 {
		s.Labels = labels.NewSelector().Add(g.labelReqs...)
	}
	if len(g.fieldSet) > 0 {
		s.Fields = fields.SelectorFromSet(g.fieldSet)
	}
	return s
}

var unsafeName = regexp.MustCompile(`[^a-z0-9.-]+`)

// ID is the gate's name: the one it was given, or one derived from its kind
// and object name (or its place among the module's gates).
func (g *Gate) ID() string {
	if g.Named != "" {
		return g.Named
	}
	base := "sample"
	if g.Sample == nil {
		base = strings.ToLower(g.Wait.GVK.Kind)
	}
	if g.Wait.Name != "" {
		base += "-" + g.Wait.Name
	} else {
		base += fmt.Sprintf("-%d", g.Index)
	}
	return strings.Trim(unsafeName.ReplaceAllString(strings.ToLower(base), "-"), "-.")
}

// Resolve is the gate as every role and tool reads it.
func (g *Gate) Resolve() spec.Gate {
	sg := spec.Gate{
		Name: g.ID(), Phase: g.Phase, WaitsFor: g.Describe(), Timeout: g.Timeout,
		Optional: g.Optional, Fallback: g.Fallback != nil, Site: g.Site, OnTimeout: g.Fallback,
		Creates: g.Creates,
	}
	if g.Sample != nil {
		sg.Sample = g.Sample.Run
		return sg
	}
	sg.Wait = g.WaitSpec()
	waits := spec.ObjectOf(sg.Wait.GVK, sg.Wait.Namespace, sg.Wait.Name)
	if sg.Wait.Labels != nil {
		waits.Labels = sg.Wait.Labels.String()
	}
	sg.Waits = &waits
	sg.Finish = g.Finish
	return sg
}

// Validate reports the mistakes only the module's gates together show.
func Validate(gates []*Gate) []error {
	var errs []error
	byName := map[string]*Gate{}
	for _, g := range gates {
		if g.outcome == "" {
			ends := "ToBeCreated, ToMatch, ToBeGone or ToBe"
			if g.Sample != nil {
				ends = "ToMatch(func(sample) bool)" // a sample has no other outcome
			}
			errs = append(errs, fmt.Errorf("%s: gate %s has no outcome: end it with %s", g.Site, g.ID(), ends))
		}
		if other, ok := byName[g.ID()]; ok {
			errs = append(errs, fmt.Errorf("%s: gate name %q is already used by the gate at %s: give one of them another name with Named", g.Site, g.ID(), other.Site))
		}
		byName[g.ID()] = g
		if g.Fallback != nil && g.Timeout == 0 {
			errs = append(errs, fmt.Errorf("%s: gate %s has OnTimeout but no Timeout: add Timeout(d)", g.Site, g.ID()))
		}
		if g.Optional && g.Timeout == 0 {
			errs = append(errs, fmt.Errorf("%s: gate %s is Optional but has no Timeout, so it would never be skipped: add Timeout(d)", g.Site, g.ID()))
		}
	}
	return errs
}
