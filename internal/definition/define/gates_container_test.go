package define_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/vigilkit/vigil/internal/definition/define"
	"github.com/vigilkit/vigil/internal/definition/spec"
)

// For(Gates) gives a variable or a volume to the init container of every
// phase a gate runs in, once each, whenever the gates are declared.
func TestGatesIsEveryGatePhase(t *testing.T) {
	m := define.New("gates_container_test.go:1", "mod", "", nil, "", 0, "1.0.0")
	gates := define.Container{Role: define.GatesRole}
	e, err := define.NewEnv("TOKEN", "here")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.SetValue("x", "here"); err != nil {
		t.Fatal(err)
	}
	if err := e.For("here", []define.Container{gates, {Role: spec.AdmissionContainer}}); err != nil {
		t.Fatal(err)
	}
	m.AddEnv(e)
	mt, err := define.NewMount(spec.SecretKind, "s", "/etc/s", "here")
	if err != nil {
		t.Fatal(err)
	}
	if err := mt.For("here", []define.Container{{Phase: 2}, gates}); err != nil {
		t.Fatal(err)
	}
	m.AddMount(mt)
	for _, phase := range []int{2, 0, 2} {
		g := &define.Gate{Phase: phase}
		g.Wait.Name = "a"
		m.AddGate(g, "here")
	}
	r := m.Resolve()
	if got, want := r.Env[0].Containers, []string{spec.InitContainerName(0), spec.InitContainerName(2), spec.AdmissionContainer}; !slices.Equal(got, want) {
		t.Errorf("Env For(Gates, Admission) containers %v, want %v", got, want)
	}
	if got, want := r.Mounts[0].Containers, []string{spec.InitContainerName(2), spec.InitContainerName(0)}; !slices.Equal(got, want) {
		t.Errorf("Mount For(Phase(2), Gates) containers %v, want %v", got, want)
	}
}

// For(Gates) in a module without gates names no container: a mistake.
func TestGatesWithoutGates(t *testing.T) {
	m := define.New("here", "mod", "", nil, "", 0, "1.0.0")
	e, _ := define.NewEnv("TOKEN", "env.go:9")
	_ = e.SetValue("x", "env.go:9")
	_ = e.For("env.go:9", []define.Container{{Role: define.GatesRole}})
	m.AddEnv(e)
	if err := m.Verify(); err == nil || !strings.Contains(err.Error(), "env.go:9: ") || !strings.Contains(err.Error(), "For(Gates): the module has no gates") {
		t.Fatalf("Verify() = %v, want For(Gates) refused at its site", err)
	}
}
