package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/vigilkit/vigil/internal/gaterun"
)

// Exit codes of vigil binaries.
const (
	ExitOK       = 0
	ExitFailed   = 1
	ExitTimedOut = 124
)

// NewRootCommand returns the vigil command with every verb.
func NewRootCommand(out, errOut io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "vigil",
		Short:         "vigil builds, runs and tests Kubernetes modules with startup gates",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(out)
	root.SetErr(errOut)
	root.AddCommand(newControlPlaneCommand(out, errOut))
	root.AddCommand(newStoreCommand(out))
	root.AddCommand(newWaitCommand(out, errOut))
	root.AddCommand(newInitCommand(out))
	root.AddCommand(newDevCommand(out, errOut))
	return root
}

// Execute runs the vigil command line and returns the process exit code.
func Execute(ctx context.Context, args []string, out, errOut io.Writer) int {
	log := logr.FromSlogHandler(slog.NewTextHandler(errOut, &slog.HandlerOptions{Level: slog.LevelInfo}))
	setGlobalLoggers(log)
	ctx = logr.NewContext(ctx, log)

	root := NewRootCommand(out, errOut)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	return exitCode(errOut, err)
}

var globalLoggers sync.Once

// setGlobalLoggers sends controller-runtime's and client-go's (klog) logs to
// the process's log. They are process-wide: the first call wins, so that
// commands run side by side in one process (tests) do not race.
func setGlobalLoggers(log logr.Logger) {
	globalLoggers.Do(func() {
		ctrllog.SetLogger(log)
		klog.SetLogger(log)
	})
}

func exitCode(errOut io.Writer, err error) int {
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, gaterun.ErrTimedOut):
		fmt.Fprintf(errOut, "vigil: timed out: %v\n", err)
		return ExitTimedOut
	default:
		fmt.Fprintf(errOut, "vigil: %v\n", err)
		return ExitFailed
	}
}
