package modcli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vigilkit/vigil/internal/commands/cmdutil"
	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/shipping/chart"
)

func chartCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "chart -o DIR --image IMAGE",
		Short: "Write the module's Helm chart",
		Long: `Write the module's Helm chart into DIR: Chart.yaml, values.yaml,
values.schema.json, templates/ and the Store CRD in crds/ (shared by every
vigil module: Helm never deletes it). The templates are the objects manifests
prints, with the fields values drive (image, replicas, resources and
GOMEMLIMIT, scheduling, extra env and volumes, log level, the serving
certificate: managed, an existing Secret or cert-manager) turned into template
expressions; with default values the chart renders exactly what manifests
prints. A pre-delete hook stops the watcher and runs unregister
--remove-finalizers as its own ServiceAccount.`,
	}
}

// packageFlags are the flags of the commands that write what ships the
// module (chart, zarf): a folder, the image, and whether a deadlock may be
// written.
type packageFlags struct {
	Dir           string
	Image         string
	AllowDeadlock bool
}

// addFlags declares the flags, the folder's and the image's as what says.
func (f *packageFlags) addFlags(fs *pflag.FlagSet, dir, image string) {
	fs.StringVarP(&f.Dir, "output-dir", "o", "", dir)
	fs.StringVar(&f.Image, "image", "", image)
	fs.BoolVar(&f.AllowDeadlock, "allow-deadlock", false, "write even when plan finds a startup deadlock")
}

// refuseDeadlock is the error that refuses to write what of module m
// when plan finds a startup deadlock in it, unless allowed.
func refuseDeadlock(m *spec.Module, what string, allowed bool) error {
	cycles := findDeadlocks(m, nil)
	if len(cycles) == 0 || allowed {
		return nil
	}
	var b strings.Builder
	_ = writeDeadlocks(&b, cycles, nil)
	return fmt.Errorf("%w: refusing to write %s that would never become ready (--allow-deadlock writes it anyway):%s", ErrDeadlock, what, strings.TrimRight(b.String(), "\n"))
}

// ChartFlags are the flags of `<module> chart`.
type ChartFlags struct {
	packageFlags
	Kubernetes cmdutil.KubernetesFlag
	Memory     memoryFlags
}

// NewChartFlags returns the flags.
func NewChartFlags() *ChartFlags { return &ChartFlags{} }

// AddFlags declares the flags.
func (f *ChartFlags) AddFlags(fs *pflag.FlagSet) {
	f.addFlags(fs, "folder to write the chart into (required)",
		"the module's container image, the default of image.repository, image.tag and image.digest (required)")
	cmdutil.AddKubernetesFlag(fs, &f.Kubernetes, "the oldest cluster the chart installs on (its kubeVersion; default the module's MinKubernetes)")
	f.Memory.addFlags(fs, true)
}

// ToOptions checks that a folder is given.
func (f *ChartFlags) ToOptions(m *spec.Module, out io.Writer) (*ChartOptions, error) {
	if f.Dir == "" {
		return nil, errors.New("-o: expected the folder to write the chart into, as in `chart -o ./chart --image ghcr.io/acme/module:1.0.0`")
	}
	if err := f.Memory.check(); err != nil {
		return nil, err
	}
	o := &ChartOptions{Module: m, Out: out, Dir: f.Dir, Chart: chart.Options{Image: f.Image}, AllowDeadlock: f.AllowDeadlock, Memory: f.Memory}
	if f.Kubernetes.Given() {
		r, err := f.Kubernetes.Release()
		if err != nil {
			return nil, fmt.Errorf("--kubernetes: %w", err)
		}
		o.Chart.Kubernetes = r
	}
	return o, nil
}

// ChartOptions are a writing of the module's chart.
type ChartOptions struct {
	Module *spec.Module
	Out    io.Writer
	// Dir is the folder the chart is written into.
	Dir   string
	Chart chart.Options
	// AllowDeadlock writes the chart even when plan finds a deadlock.
	AllowDeadlock bool
	// Memory gives the defaults of the roles' memory limits.
	Memory memoryFlags
}

// Run writes the module's chart, unless it would deadlock.
func (o *ChartOptions) Run(ctx context.Context) error {
	m := o.Module
	if err := refuseDeadlock(m, "a chart", o.AllowDeadlock); err != nil {
		return err
	}
	var err error
	if o.Chart.AdmissionMemory, o.Chart.WatcherMemory, err = o.Memory.sized(ctx, m, o.Out); err != nil {
		return err
	}
	if err := chart.Write(m, o.Dir, o.Chart); err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "chart of module %s written to %s\n", m.Name, o.Dir)
	return nil
}
