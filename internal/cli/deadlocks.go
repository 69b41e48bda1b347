package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/vigilkit/vigil/internal/deadlock"
	"github.com/vigilkit/vigil/internal/manifests"
)

// deadlockModule is what the deadlock analysis sees of a module: its gates,
// what they wait for and create, and its fail-closed webhooks.
func deadlockModule(d manifests.Module) deadlock.Module {
	out := deadlock.Module{Name: d.Name, Namespace: d.Namespace}
	for _, g := range d.Gates {
		dg := deadlock.Gate{Name: g.Name, Phase: g.Phase, Site: g.Site}
		if !g.Sample {
			dg.Waits = deadlock.Object{Group: g.GVK.Group, Version: g.GVK.Version, Kind: g.GVK.Kind, Namespace: g.Namespace, Name: g.ObjectName, Labels: g.Labels}
		}
		for _, c := range g.Creates {
			dg.Creates = append(dg.Creates, deadlock.Object{Group: c.GVK.Group, Version: c.GVK.Version, Kind: c.GVK.Kind, Namespace: c.Namespace, Name: c.Name})
		}
		out.Gates = append(out.Gates, dg)
	}
	for _, b := range d.Bindings {
		if !b.FailClosed {
			continue
		}
		w := deadlock.Webhook{Name: b.ID(), Group: b.GVK.Group, Kind: b.GVK.Kind, Namespaces: b.Namespaces}
		for _, op := range b.Operations {
			w.Operations = append(w.Operations, string(op))
		}
		out.FailClosed = append(out.FailClosed, w)
	}
	return out
}

// readOtherModules reads the `plan -o json` of other modules, given with
// --with, for the analysis across modules.
func readOtherModules(paths []string) ([]deadlock.Module, error) {
	var out []deadlock.Module
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("--with %s: %w", p, err)
		}
		var plan PlanJSON
		if err := json.Unmarshal(data, &plan); err != nil {
			return nil, fmt.Errorf("--with %s: expected the output of `<module> plan -o json`: %w", p, err)
		}
		if plan.Deadlock.Name == "" {
			return nil, fmt.Errorf("--with %s: no module in it: expected the output of `<module> plan -o json`", p)
		}
		out = append(out, plan.Deadlock)
	}
	return out, nil
}

// ErrDeadlock is returned by plan and manifests when the analysis finds a
// startup deadlock.
var ErrDeadlock = errors.New("startup deadlock")

// findDeadlocks analyses the module together with the others.
func findDeadlocks(m Module, others []deadlock.Module) []deadlock.Cycle {
	mods := append([]deadlock.Module{deadlockModule(m.Deployment())}, others...)
	return deadlock.Find(mods)
}

// writeDeadlocks prints the analysis and returns ErrDeadlock when it found
// any.
func writeDeadlocks(out io.Writer, cycles []deadlock.Cycle, others []deadlock.Module) error {
	with := ""
	if len(others) > 0 {
		var names []string
		for _, o := range others {
			names = append(names, o.Name)
		}
		with = " together with " + strings.Join(names, ", ")
	}
	if len(cycles) == 0 {
		fmt.Fprintf(out, "\ndeadlocks%s: none found\n", with)
		return nil
	}
	fmt.Fprintf(out, "\ndeadlocks%s: %d found; the module would never become ready:\n", with, len(cycles))
	for i, c := range cycles {
		fmt.Fprintf(out, "  %d. %s\n", i+1, c.String())
	}
	return fmt.Errorf("%w: %d cycle(s), printed above: break each by moving a gate to an earlier phase, declaring what creates the object, or narrowing the fail-closed webhook", ErrDeadlock, len(cycles))
}
