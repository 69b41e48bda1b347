package modcli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vigilkit/vigil/internal/chart"
	"github.com/vigilkit/vigil/internal/spec"
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

// ChartFlags are the flags of `<module> chart`.
type ChartFlags struct {
	Dir           string
	Image         string
	AllowDeadlock bool
}

// NewChartFlags returns the flags.
func NewChartFlags() *ChartFlags { return &ChartFlags{} }

// AddFlags declares the flags.
func (f *ChartFlags) AddFlags(fs *pflag.FlagSet) {
	fs.StringVarP(&f.Dir, "output-dir", "o", "", "folder to write the chart into (required)")
	fs.StringVar(&f.Image, "image", "", "the module's container image, the default of image.repository, image.tag and image.digest (required)")
	fs.BoolVar(&f.AllowDeadlock, "allow-deadlock", false, "write even when plan finds a startup deadlock")
}

// ToOptions checks that a folder is given.
func (f *ChartFlags) ToOptions(m *spec.Module, out io.Writer) (*ChartOptions, error) {
	if f.Dir == "" {
		return nil, errors.New("-o: expected the folder to write the chart into, as in `chart -o ./chart --image ghcr.io/acme/module:1.0.0`")
	}
	return &ChartOptions{Module: m, Out: out, Dir: f.Dir, Chart: chart.Options{Image: f.Image}, AllowDeadlock: f.AllowDeadlock}, nil
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
}

// Run writes the module's chart, unless it would deadlock.
func (o *ChartOptions) Run(context.Context) error {
	m := o.Module
	if cycles := findDeadlocks(m, nil); len(cycles) > 0 && !o.AllowDeadlock {
		var b strings.Builder
		_ = writeDeadlocks(&b, cycles, nil)
		return fmt.Errorf("%w: refusing to write a chart that would never become ready (--allow-deadlock writes it anyway):%s", ErrDeadlock, strings.TrimRight(b.String(), "\n"))
	}
	if err := chart.Write(m, o.Dir, o.Chart); err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "chart of module %s written to %s\n", m.Name, o.Dir)
	return nil
}
