package cli

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/vigilkit/vigil/store/v1alpha1"
)

func newStoreCommand(out io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "store",
		Short: "Work with the Store custom resource modules keep their state in",
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "crd",
		Short: "Print the Store CustomResourceDefinition (stores.vigil.dev) as YAML",
		Long: `Print the Store CustomResourceDefinition. A module installs it itself when it
may create CRDs; otherwise a cluster admin applies it once:

    vigil store crd | kubectl apply -f -`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := out.Write(v1alpha1.CRDYAML)
			return err
		},
	})
	return cmd
}
