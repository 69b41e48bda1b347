package define_test

import (
	"strings"
	"testing"

	"github.com/vigilkit/vigil/internal/definition/define"
	"github.com/vigilkit/vigil/internal/definition/spec"
)

func modeModule(t *testing.T, caps ...spec.Capability) *define.Module {
	t.Helper()
	site := define.Caller() // the test's line, as a facade entry passes its caller's
	m := define.New(site, "mod", "", nil, "", 0, "1.0.0")
	for _, c := range caps {
		c.Site = site
		m.AddCapability(c)
		m.AddBinding(spec.Binding{Capability: c.Name, Name: c.Name + "-check", Action: spec.Validate})
	}
	return m
}

func TestModesResolveIntoCapabilitiesAndBindings(t *testing.T) {
	m := modeModule(t,
		spec.Capability{Name: "plain"},
		spec.Capability{Name: "trial", Mode: spec.Warn},
		spec.Capability{Name: "audited", Mode: spec.Audit},
		spec.Capability{Name: "strict", FailClosed: true, Mode: spec.Enforce},
	)
	if err := m.Verify(); err != nil {
		t.Fatal(err)
	}
	r := m.Resolve()
	want := map[string]spec.Mode{"plain": spec.Enforce, "trial": spec.Warn, "audited": spec.Audit, "strict": spec.Enforce}
	for _, c := range r.Capabilities {
		if c.Mode != want[c.Name] {
			t.Errorf("capability %s: mode %q, want %q", c.Name, c.Mode, want[c.Name])
		}
	}
	for _, b := range r.Bindings {
		if b.Mode != want[b.Capability] {
			t.Errorf("binding %s: mode %q, want its capability's %q", b.ID(), b.Mode, want[b.Capability])
		}
	}
	if len(r.Bindings) != 4 {
		t.Fatalf("%d bindings, want 4", len(r.Bindings))
	}
}

func TestModeMistakes(t *testing.T) {
	for _, tc := range []struct {
		c    spec.Capability
		want string
	}{
		{spec.Capability{Name: "strict", FailClosed: true, Mode: spec.Warn}, "capability strict: a fail-closed capability enforces: it cannot run in Warn mode"},
		{spec.Capability{Name: "strict", FailClosed: true, Mode: spec.Audit}, "capability strict: a fail-closed capability enforces: it cannot run in Audit mode"},
		{spec.Capability{Name: "odd", Mode: "dryrun"}, `capability odd: Mode("dryrun"): expected ModeEnforce, ModeWarn or ModeAudit`},
	} {
		err := modeModule(t, tc.c).Verify()
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "mode_test.go:") {
			t.Errorf("%+v: error %v, want %q at its call site", tc.c, err, tc.want)
		}
	}
}
