package deadlock_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/operating/deadlock"
)

func secret(ns, name string) Object {
	return Object{Version: "v1", Kind: "Secret", Namespace: ns, Name: name}
}

// Of reads the required Secrets and ConfigMaps of a module's containers: a
// pod's volumes as needs of its first container, a variable's as its own
// container's; optional ones are no needs.
func TestOfReadsRequiredSecretsAndConfigMaps(t *testing.T) {
	m := &spec.Module{Name: "m", Namespace: "m-system",
		Phases: []spec.Phase{
			{Phase: 0, InitContainer: "gate-phase-0", Gates: []spec.Gate{{Name: "a", Phase: 0}}},
			{Phase: 1, InitContainer: "gate-phase-1", Gates: []spec.Gate{{Name: "b", Phase: 1}}},
		},
		Env: []spec.Env{
			{Name: "TOKEN", From: &spec.KeyRef{Kind: "Secret", Name: "api", Key: "token"}, Containers: []string{"gate-phase-1", "admission"}, Site: "main.go:3"},
			{Name: "REGION", From: &spec.KeyRef{Kind: "ConfigMap", Name: "cluster", Key: "region", Optional: true}, Containers: []string{"admission"}},
			{Name: "MODE", Value: "x", Containers: []string{"gate-phase-0"}},
		},
		Mounts: []spec.Mount{
			{Volume: "configmap-tuning", Kind: "ConfigMap", Name: "tuning", Path: "/etc/tuning", Containers: []string{"admission"}, Site: "main.go:5"},
			{Volume: "secret-extra", Kind: "Secret", Name: "extra", Path: "/etc/extra", Optional: true, Containers: []string{"admission"}},
			{Volume: "secret-w", Kind: "Secret", Name: "w", Path: "/etc/w", Containers: []string{"watcher"}},
		},
	}
	var got []string
	for _, n := range deadlock.Of(m).Needs {
		got = append(got, n.Object.Kind+" "+n.Object.Namespace+"/"+n.Object.Name+" "+map[bool]string{true: "phase", false: "admission"}[n.Phase >= 0])
	}
	want := []string{"ConfigMap m-system/tuning phase", "Secret m-system/api phase", "Secret m-system/api admission"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Of(m).Needs = %q, want %q", got, want)
	}
}

// A needed Secret is waited for like a gate's object: created by a gate that
// can finish, it is fine; created only by a gate its own container would run,
// or admitted only by a module whose pods wait for this one, it is a deadlock.
func TestNeededSecrets(t *testing.T) {
	made := secret("m-system", "made")
	need := func(phase int) deadlock.Need {
		return deadlock.Need{Object: made, Phase: phase, Why: "volume secret-made at /etc/made (main.go:9)"}
	}
	m := func(needs ...deadlock.Need) Module {
		return Module{Name: "m", Namespace: "m-system", Needs: needs, Gates: []Gate{
			gate("first", 0, cm("apps", "first"), "main.go:1"),
			gate("maker", 1, cm("apps", "input"), "main.go:2", made),
		}}
	}
	for _, tc := range []struct {
		name string
		mods []Module
		want []string // substrings of the one cycle; none for no deadlock
	}{
		{"external", []Module{{Name: "m", Namespace: "m-system", Needs: []deadlock.Need{need(0)}, Gates: []Gate{gate("first", 0, cm("apps", "first"), "main.go:1")}}}, nil},
		{"created by an earlier phase", []Module{m(need(-1))}, nil},
		{"needed by the phase that creates it", []Module{m(need(1))}, []string{
			"m phase 1 (init container gate-phase-1) cannot start before Secret m-system/made exists: volume secret-made at /etc/made (main.go:9)",
			"Secret m-system/made is created only by m phase 1 (gate maker at main.go:2)",
		}},
		{"needed by an earlier phase", []Module{m(need(0))}, []string{
			"m phase 0 (init container gate-phase-0) cannot start before Secret m-system/made exists",
			"m phase 1 runs after phase 0",
		}},
		{"admitted by another module that starts without this one", []Module{
			{Name: "m", Namespace: "m-system", Needs: []deadlock.Need{need(-1)}},
			{Name: "p", Namespace: "p-system", Gates: []Gate{gate("wait", 0, cm("m-system", "ready"), "p.go:1")},
				FailClosed: []Webhook{hook("strict/secrets", "", "Secret", "p.go:5")}},
			{Name: "q", Namespace: "q-system", Gates: []Gate{gate("maker", 0, crd("x.dev"), "q.go:1", cm("m-system", "ready"))}},
		}, nil},
		{"admitted only by a module whose pods this one's webhook holds", []Module{
			{Name: "m", Namespace: "m-system", Needs: []deadlock.Need{need(0)}, Gates: []Gate{gate("first", 0, cm("apps", "first"), "main.go:1")},
				FailClosed: []Webhook{hook("guard/pods", "", "Pod", "main.go:20")}},
			{Name: "p", Namespace: "p-system", FailClosed: []Webhook{hook("strict/secrets", "", "Secret", "p.go:5")}},
		}, []string{
			"m phase 0 (init container gate-phase-0) cannot start before Secret m-system/made exists",
			"Secret m-system/made is admitted only once p serves: it must pass p's fail-closed webhook strict/secrets at p.go:5 on CREATE",
			"p's pods in namespace p-system are created only once m serves",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cycles := deadlock.Find(tc.mods)
			if tc.want == nil {
				if len(cycles) != 0 {
					t.Fatalf("found %d deadlocks, want none: %v", len(cycles), cycles)
				}
				return
			}
			if len(cycles) != 1 {
				t.Fatalf("found %d deadlocks, want one: %v", len(cycles), cycles)
			}
			for _, w := range tc.want {
				if !strings.Contains(cycles[0].String(), w) {
					t.Errorf("the deadlock %q does not say %q", cycles[0], w)
				}
			}
		})
	}
}
