package vigil

import (
	"cmp"
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/vigilkit/vigil/internal/commands/modcli"
	"github.com/vigilkit/vigil/internal/definition/scheme"
	"github.com/vigilkit/vigil/internal/runtime/callctx"
	"github.com/vigilkit/vigil/internal/runtime/handoff"
)

// Run runs the module binary in the role its arguments name (`gate --phase N`,
// `plan`, ...; see --help) and exits the process with the role's exit code: 0
// done, 1 failed, 124 timed out. A module whose definition has mistakes exits
// with 1 before anything starts, naming each mistake's call site.
func Run(m *Module) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Execute(ctx, m, os.Args[1:])
	stop()
	os.Exit(code)
}

// Execute is Run without the exit, for tests and embedding: it runs the role
// args name and returns the exit code.
func Execute(ctx context.Context, m *Module, args []string) int {
	if len(args) == 0 || args[0] != "gate" {
		// The other roles hand the scheme to controller-runtime's clients
		// and caches, which may meet any of its types; a gate needs only the
		// groups its definition named.
		scheme.Complete(m.d.Scheme)
	}
	return modcli.Execute(ctx, m.d.Resolve(), m.Verify(), args, os.Stdout, os.Stderr)
}

// GateResult reads what the gate of this name handed over: the object (or
// objects, or sample) it found, or its fallback's. It reads the handoff folder
// of the running role: its --handoff-dir, else the folder VIGIL_HANDOFF_DIR
// names, else the pods' handoff folder (an emptyDir shared by the module's
// init containers and its main container). found is false when the gate has not run in this pod or
// was skipped.
func GateResult[T any](m *Module, name string) (result T, found bool, err error) {
	// The running role's --handoff-dir, else the environment's, else the pods'.
	dir := cmp.Or(callctx.HandoffDir(m.d.Name), os.Getenv(modcli.EnvHandoffDir), modcli.DefaultHandoffDir)
	return handoff.Result[T](dir, name)
}
