package modcli

import (
	"context"
	"errors"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"

	"github.com/vigilkit/vigil/internal/commands/cmdutil"
	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/roles/gaterun"
)

func gateCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "gate --phase N",
		Short: "Run the startup gates of one phase, as the module's init container gate-phase-N does",
		Long: `Run every gate of phase N at once and exit when all required ones are done.

Exit codes: 0 done; 1 failed (a gate.Permanent error, RBAC refused, or a
definition mistake); 124 timed out (a required gate with a Timeout ran out of
time — the kubelet then restarts the init container with back-off from 10s
doubling to 5m, so prefer Optional or OnTimeout with timeouts). A required
gate without a Timeout waits without limit.`,
	}
}

// defaultTerminationLog is where the kubelet reads a container's
// termination message from.
const defaultTerminationLog = "/dev/termination-log"

// GateFlags are the flags of `<module> gate`.
type GateFlags struct {
	Kube           cmdutil.KubeFlags
	Phase          int
	HandoffDir     string
	TerminationLog string
	Interval       time.Duration
}

// NewGateFlags returns the flags with no phase chosen.
func NewGateFlags() *GateFlags { return &GateFlags{Phase: -1} }

// AddFlags declares the flags.
func (f *GateFlags) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&f.Phase, "phase", -1, "the phase to run (0 or more)")
	f.Kube.AddFlags(fs)
	fs.StringVar(&f.HandoffDir, "handoff-dir", envOr(EnvHandoffDir, DefaultHandoffDir), "folder the gates' results are written to (env VIGIL_HANDOFF_DIR)")
	fs.StringVar(&f.TerminationLog, "termination-log", defaultTerminationLog, "file the phase's summary is written to, when it exists (the kubelet creates it)")
	fs.DurationVar(&f.Interval, "progress-interval", 5*time.Second, "how often a waiting gate logs what it waits for")
}

// ToOptions checks the phase and loads the client config.
func (f *GateFlags) ToOptions(m *spec.Module, _ io.Writer) (*GateOptions, error) {
	if f.Phase < 0 {
		return nil, errors.New("--phase: expected the phase to run, 0 or more, as in `gate --phase 0`")
	}
	cfg, err := f.Kube.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	termination := f.TerminationLog
	if _, err := os.Stat(termination); err != nil && termination == defaultTerminationLog {
		termination = "" // not in a pod: the kubelet creates it
	}
	return &GateOptions{Config: cfg, Module: m, Gate: gaterun.Options{
		Phase: f.Phase, HandoffDir: f.HandoffDir, TerminationLog: termination, Interval: f.Interval,
	}}, nil
}

// GateOptions are a run of one phase of the module's gates.
type GateOptions struct {
	Config *rest.Config
	Module *spec.Module
	Gate   gaterun.Options
}

// Run runs the phase (gaterun.Run).
func (o *GateOptions) Run(ctx context.Context) error {
	return gaterun.Run(ctx, o.Config, o.Module, o.Gate)
}
