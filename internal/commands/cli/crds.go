package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/vigilkit/vigil/internal/shipping/crdgen"
)

func newCRDsCommand(out io.Writer) *cobra.Command {
	dir := "crds"
	cmd := &cobra.Command{
		Use:   "crds PACKAGES...",
		Short: "Write the CustomResourceDefinitions of the module's own Go types, for vigil.CRDs",
		Long: `Write the CustomResourceDefinitions of the Go types in PACKAGES (as go build
takes them, such as ./api/...) to the folder --output names, one file per CRD
(<group>_<plural>.yaml), with controller-tools' CRD generator (what
controller-gen crd runs): a root type is marked // +kubebuilder:object:root=true
in a package marked // +groupName=<group>, and its fields' kubebuilder markers
(+kubebuilder:validation:Minimum=1, Enum=a;b, +optional, ...) make the schema.

The module embeds the files and declares them, so that manifests, the chart's
crds/ and plan carry them:

    //go:embed crds/example.dev_widgets.yaml
    var widgetCRD []byte

    vigil.CRDs(m, widgetCRD)`,
		Example: `  vigil crds ./api/...
  go tool vigil crds -o crds ./api/v1      # in a module that has vigil as a tool
  //go:generate go tool vigil crds ./api/...`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			files, err := crdgen.Generate(dir, args...)
			for _, f := range files {
				fmt.Fprintf(out, "wrote %s\n", f)
			}
			return err
		},
	}
	cmd.Flags().StringVarP(&dir, "output", "o", dir, "the folder to write the CRDs to")
	return cmd
}
