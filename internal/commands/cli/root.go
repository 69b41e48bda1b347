package cli

import (
	"context"
	"io"
	"os"
	"path/filepath"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"

	"github.com/vigilkit/vigil/internal/commands/cmdutil"
)

// PluginName is the name under which kubectl runs vigil as a plugin
// (`kubectl vigil status`): a link to vigil so named on the PATH.
const PluginName = "kubectl-vigil"

// NewRootCommand returns the vigil command with every verb.
func NewRootCommand(out, errOut io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "vigil",
		Short:         "vigil builds, runs and tests Kubernetes modules with startup gates",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	if filepath.Base(os.Args[0]) == PluginName {
		// Run by kubectl as a plugin: its help and errors say so.
		root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl vigil"}
	}
	root.SetOut(out)
	root.SetErr(errOut)
	root.AddCommand(newControlPlaneCommand(out, errOut))
	root.AddCommand(newNodeCommand(out, errOut))
	root.AddCommand(newStoreCommand(out))
	root.AddCommand(newWaitCommand(out, errOut))
	root.AddCommand(newInitCommand(out))
	root.AddCommand(newDevCommand(out, errOut))
	root.AddCommand(newImageCommand(out, errOut))
	root.AddCommand(newCRDsCommand(out))
	root.AddCommand(newStatusCommand(out))
	root.AddCommand(newMonitorCommand(out))
	root.AddCommand(newVersionCommand(out))
	return root
}

// Execute runs the vigil command line and returns the process exit code.
func Execute(ctx context.Context, args []string, out, errOut io.Writer) int {
	ctx = logr.NewContext(ctx, cmdutil.Logger(errOut))

	root := NewRootCommand(out, errOut)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	return cmdutil.ExitCode(errOut, err)
}
