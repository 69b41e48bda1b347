package modcli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/shipping/zarf"
)

func zarfCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "zarf -o DIR --image IMAGE",
		Short: "Write the module's Zarf package definition",
		Long: `Write the module's Zarf package definition into DIR: zarf.yaml (kind
ZarfPackageConfig), with one required component that installs the module's
chart, written into DIR/chart as chart writes it, into the module's namespace,
and carries IMAGE — so that zarf package create DIR builds an air-gap package
of the module and a UDS bundle can take it.`,
	}
}

// ZarfFlags are the flags of `<module> zarf`.
type ZarfFlags struct{ packageFlags }

// NewZarfFlags returns the flags.
func NewZarfFlags() *ZarfFlags { return &ZarfFlags{} }

// AddFlags declares the flags.
func (f *ZarfFlags) AddFlags(fs *pflag.FlagSet) {
	f.addFlags(fs, "folder to write zarf.yaml and the chart into (required)",
		"the module's container image, which the package carries and the chart runs (required)")
}

// ToOptions checks that a folder and an image are given.
func (f *ZarfFlags) ToOptions(m *spec.Module, out io.Writer) (*ZarfOptions, error) {
	if f.Dir == "" {
		return nil, errors.New("-o: expected the folder to write the package definition into, as in `zarf -o ./zarf --image ghcr.io/acme/module:1.0.0`")
	}
	if f.Image == "" {
		return nil, errors.New("--image: expected the module's image, which the package carries, as in `zarf -o ./zarf --image ghcr.io/acme/module:1.0.0`")
	}
	return &ZarfOptions{Module: m, Out: out, Dir: f.Dir, Image: f.Image, AllowDeadlock: f.AllowDeadlock}, nil
}

// ZarfOptions are a writing of the module's Zarf package definition.
type ZarfOptions struct {
	Module        *spec.Module
	Out           io.Writer
	Dir, Image    string
	AllowDeadlock bool
}

// Run writes the package definition, unless the module would deadlock.
func (o *ZarfOptions) Run(context.Context) error {
	m := o.Module
	if err := refuseDeadlock(m, "a package", o.AllowDeadlock); err != nil {
		return err
	}
	if err := zarf.Write(m, o.Dir, o.Image); err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "Zarf package definition of module %s written to %s (zarf.yaml, chart/)\n", m.Name, o.Dir)
	return nil
}
