package modcli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/operating/deadlock"
)

// readOtherModules reads the `plan -o json` of other modules, given with
// --with, for the analysis across modules.
func readOtherModules(paths []string) ([]deadlock.Module, error) {
	var out []deadlock.Module
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("--with %s: %w", p, err)
		}
		other, err := spec.Decode(data)
		if err != nil {
			return nil, fmt.Errorf("--with %s: %w", p, err)
		}
		out = append(out, deadlock.Of(other))
	}
	return out, nil
}

// ErrDeadlock is returned by plan and manifests when the analysis finds a
// startup deadlock.
var ErrDeadlock = errors.New("startup deadlock")

// findDeadlocks analyses the module together with the others.
func findDeadlocks(m *spec.Module, others []deadlock.Module) []deadlock.Cycle {
	mods := append([]deadlock.Module{deadlock.Of(m)}, others...)
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
