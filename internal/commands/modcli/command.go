package modcli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vigilkit/vigil/internal/commands/cmdutil"
	"github.com/vigilkit/vigil/internal/definition/spec"
)

// Execute runs a module binary's command line and returns its exit code.
func Execute(ctx context.Context, m *spec.Module, defErr error, args []string, out, errOut io.Writer) int {
	log := cmdutil.Logger(errOut)
	ctx = logr.NewContext(ctx, log)
	root := NewCommand(m, defErr, out, errOut)
	root.SetArgs(args)
	return cmdutil.ExitCode(errOut, root.ExecuteContext(ctx))
}

// NewCommand returns the command line of a module binary. defErr holds the
// mistakes of the module's definition: every command refuses to run with any.
func NewCommand(m *spec.Module, defErr error, out, errOut io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           m.Name,
		Short:         fmt.Sprintf("%s is a vigil module: run it in one of its roles", m.Name),
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if defErr != nil {
				return fmt.Errorf("module %s has definition mistakes:\n%w", m.Name, defErr)
			}
			if roles[cmd.Name()] {
				return CheckRendered(m, os.Getenv(spec.EnvSpecHash), os.Getenv(spec.EnvSpecParts))
			}
			return nil
		},
	}
	root.SetOut(out)
	root.SetErr(errOut)
	root.AddCommand(
		newCommand(m, gateCommand(), NewGateFlags()),
		newCommand(m, admissionCommand(), NewAdmissionFlags()),
		newCommand(m, watcherCommand(), NewWatcherFlags()),
		newCommand(m, unregisterCommand(), NewUnregisterFlags()),
		newCommand(m, chartCommand(), NewChartFlags()),
		newCommand(m, manifestsCommand(), NewManifestsFlags()),
		newCommand(m, zarfCommand(), NewZarfFlags()),
		newCommand(m, planCommand(), NewPlanFlags()),
		newCommand(m, testCommand(m.Name), NewTestFlags()),
	)
	return root
}

// roles are the commands that run in the module's containers, from its
// manifests: each is held to the definition they were rendered from.
var roles = map[string]bool{"gate": true, "admission": true, "watcher": true, "unregister": true}

// CheckRendered refuses to run a role whose definition is not the one its
// container was rendered from (sum and parts, from spec.EnvSpecHash and
// spec.EnvSpecParts; no check when sum is empty, as outside a rendered
// container): the container would serve another module than the
// manifests installed — webhooks, RBAC and gates of one definition, a
// process of another.
func CheckRendered(m *spec.Module, sum, parts string) error {
	if sum == "" {
		return nil
	}
	own, err := m.Fingerprint()
	if err != nil {
		return err
	}
	if own.Sum == sum {
		return nil
	}
	differ := "unknown (" + spec.EnvSpecParts + " is not set)"
	if parts != "" {
		differ = strings.Join(own.Differing(parts), ", ")
	}
	return fmt.Errorf("module %s: this container was rendered from another definition than this binary resolves "+
		"(%s=%s, this binary's: %s); they differ in: %s. "+
		"Something shaped the definition differently where the manifests were rendered — most often an environment variable the definition reads "+
		"(FOO=x %s manifests, with FOO not set in the containers), or a binary other than the image's. "+
		"Render the manifests or the chart again with the environment the containers get (vigil.Env gives a variable to the containers), from the image's binary, and apply them",
		m.Name, spec.EnvSpecHash, sum, own.Sum, differ, m.Name)
}

// Every command of a module binary has one shape, that of kubectl's
// commands (pkg/cmd/wait): its flags fill a Flags value, ToOptions checks
// them and turns them into Options, and Options.Run does the work.

// flags are a command's flags.
type flags[O options] interface {
	// AddFlags declares the flags.
	AddFlags(fs *pflag.FlagSet)
	// ToOptions checks the flags and turns them into the options of a run
	// of the module, printing to out.
	ToOptions(m *spec.Module, out io.Writer) (O, error)
}

// options are what a command runs with.
type options interface {
	Run(ctx context.Context) error
}

// positional flags take the command's arguments too (`test DIR`).
type positional interface {
	// Args checks the arguments; SetArgs takes them, before ToOptions.
	Args() cobra.PositionalArgs
	SetArgs(args []string)
}

// newCommand makes cmd (its use and help) the command of f: it takes no
// arguments, unless f is positional, and runs the options its flags give.
func newCommand[O options](m *spec.Module, cmd *cobra.Command, f flags[O]) *cobra.Command {
	cmd.Args = cobra.NoArgs
	p, takesArgs := f.(positional)
	if takesArgs {
		cmd.Args = p.Args()
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if takesArgs {
			p.SetArgs(args)
		}
		o, err := f.ToOptions(m, cmd.OutOrStdout())
		if err != nil {
			return err
		}
		return o.Run(cmd.Context())
	}
	f.AddFlags(cmd.Flags())
	return cmd
}

// EnvHandoffDir names the folder gates hand their results over in.
const EnvHandoffDir = "VIGIL_HANDOFF_DIR"

// DefaultHandoffDir is the handoff folder in a module's pods: an emptyDir
// shared by its init containers and its main container.
const DefaultHandoffDir = "/var/run/vigil"

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
