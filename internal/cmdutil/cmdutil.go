package cmdutil

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
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

// Logger is the text logger vigil binaries write to errOut; it also becomes
// controller-runtime's and client-go's (see SetGlobalLoggers).
func Logger(errOut io.Writer) logr.Logger {
	log := logr.FromSlogHandler(slog.NewTextHandler(errOut, &slog.HandlerOptions{Level: LogLevel(errOut)}))
	SetGlobalLoggers(log)
	return log
}

// EnvLogLevel sets the level of a module's log: debug, info (the
// default), warn or error. The chart's logLevel sets it.
const EnvLogLevel = "VIGIL_LOG_LEVEL"

// LogLevel is the level VIGIL_LOG_LEVEL asks for; info when unset, and
// when unknown, after saying so on errOut.
func LogLevel(errOut io.Writer) slog.Level {
	v := os.Getenv(EnvLogLevel)
	if v == "" {
		return slog.LevelInfo
	}
	var l slog.Level
	if err := l.UnmarshalText([]byte(v)); err != nil {
		fmt.Fprintf(errOut, "vigil: %s=%q: expected debug, info, warn or error; logging at info\n", EnvLogLevel, v)
		return slog.LevelInfo
	}
	return l
}

var globalLoggers sync.Once

// SetGlobalLoggers sends controller-runtime's and client-go's (klog) logs to
// the process's log. They are process-wide: the first call wins, so that
// commands run side by side in one process (tests) do not race.
func SetGlobalLoggers(log logr.Logger) {
	globalLoggers.Do(func() {
		ctrllog.SetLogger(log)
		klog.SetLogger(log)
	})
}

// ExitCode prints err, if any, and maps it to the process's exit code: 124
// for a timeout, 1 for any other failure.
func ExitCode(errOut io.Writer, err error) int {
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

// LoadConfig loads a client config the way kubectl does (flag, KUBECONFIG,
// ~/.kube/config), falling back to the pod's ServiceAccount, with client-side
// rate limits set deliberately rather than client-go's 5 QPS.
func LoadConfig(kubeconfig, context string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w (set --kubeconfig or KUBECONFIG, or run in a pod)", err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	return cfg, nil
}
