package cmdutil

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/vigilkit/vigil/internal/definition/spec"
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

// SetGlobalLoggers sends controller-runtime's, client-go's (klog) and the
// default slog logger's logs to the process's log. They are process-wide: the first call wins, so that
// commands run side by side in one process (tests) do not race.
func SetGlobalLoggers(log logr.Logger) {
	globalLoggers.Do(func() {
		ctrllog.SetLogger(log)
		klog.SetLogger(log)
		// A handler's slog lines come out as vigil's own.
		slog.SetDefault(slog.New(logr.ToSlogHandler(log)))
	})
}

// ExitCode prints err, if any, and maps it to the process's exit code: 124
// for a timeout, 1 for any other failure. An error the command has printed
// already (Reported) is not printed again.
func ExitCode(errOut io.Writer, err error) int {
	var said reported
	if errors.As(err, &said) {
		errOut = io.Discard
	}
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, spec.ErrTimedOut):
		fmt.Fprintf(errOut, "vigil: timed out: %v\n", err)
		return ExitTimedOut
	default:
		fmt.Fprintf(errOut, "vigil: %v\n", err)
		return ExitFailed
	}
}

// Reported marks err as printed by the command already, in its own words:
// ExitCode maps it to its exit code without saying it a second time.
func Reported(err error) error {
	if err == nil {
		return nil
	}
	return reported{err}
}

type reported struct{ error }

func (r reported) Unwrap() error { return r.error }

// KubeFlags are the flags that say which cluster a command talks to,
// declared once for every command that needs one.
type KubeFlags struct {
	Kubeconfig string
	Context    string
}

// AddFlags declares --kubeconfig and --context.
func (k *KubeFlags) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&k.Kubeconfig, "kubeconfig", "", "kubeconfig file; in a pod, its ServiceAccount is used")
	fs.StringVar(&k.Context, "context", "", "kubeconfig context")
}

// ToRESTConfig loads the config the flags name (see LoadConfig).
func (k *KubeFlags) ToRESTConfig() (*rest.Config, error) {
	return LoadConfig(k.Kubeconfig, k.Context)
}

// LoadConfig loads a client config the way kubectl does (flag, KUBECONFIG,
// ~/.kube/config), falling back to the pod's ServiceAccount, with client-side
// rate limits set deliberately rather than client-go's 5 QPS.
func LoadConfig(kubeconfig, context string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w: %s; give a kubeconfig file with --kubeconfig FILE or KUBECONFIG=FILE, or run in a pod", err, looked(rules))
	}
	cfg.QPS, cfg.Burst = 50, 100
	return cfg, nil
}

// looked says which kubeconfig files were looked for, and which of them do
// not exist: client-go skips a missing file of KUBECONFIG or ~/.kube/config
// in silence and ends with "no configuration has been provided".
func looked(rules *clientcmd.ClientConfigLoadingRules) string {
	files := rules.Precedence
	from := "KUBECONFIG"
	switch {
	case rules.ExplicitPath != "":
		files, from = []string{rules.ExplicitPath}, "--kubeconfig"
	case os.Getenv(clientcmd.RecommendedConfigPathEnvVar) == "":
		from = "the default path"
	}
	var missing, found []string
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			missing = append(missing, f)
		} else {
			found = append(found, f)
		}
	}
	switch {
	case len(files) == 0:
		return "no kubeconfig file was named"
	case len(found) == 0:
		return fmt.Sprintf("the kubeconfig %s (from %s) does not exist", strings.Join(missing, ", "), from)
	case len(missing) > 0:
		return fmt.Sprintf("the kubeconfig %s (from %s) was read; %s does not exist", strings.Join(found, ", "), from, strings.Join(missing, ", "))
	default:
		return fmt.Sprintf("the kubeconfig %s (from %s) was read", strings.Join(found, ", "), from)
	}
}
