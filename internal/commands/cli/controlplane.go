package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/vigilkit/vigil/internal/clusters/controlplane"
	"github.com/vigilkit/vigil/internal/clusters/kubeversion"
	"github.com/vigilkit/vigil/internal/commands/cmdutil"
)

func newControlPlaneCommand(out, errOut io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "controlplane",
		Aliases: []string{"control-plane"},
		Short:   "Build and run the embedded Kubernetes control plane (kube-apiserver, etcd, kubectl)",
	}
	env := &EnvOptions{Progress: errOut}
	envCmd := &cobra.Command{
		Use:   "env",
		Short: "Print the folder of the control-plane binaries, building them first if needed",
		Long: `Print the folder holding kube-apiserver, etcd and kubectl, building them from
the Go module proxy first when they are missing (6 to 12 minutes cold, cached
afterwards). The folder is what envtest's KUBEBUILDER_ASSETS expects.

Each supported release (` + kubeversion.Names() + `) is built and cached
in a folder of its own under ~/.cache/vigil/control-plane; set
VIGIL_CONTROL_PLANE_DIR to move it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return env.Run(cmd.Context(), out) },
	}
	cmdutil.AddKubernetesFlag(envCmd.Flags(), &env.Kubernetes, "the control plane to build")
	cmd.AddCommand(envCmd)

	up := &UpOptions{Progress: errOut}
	upCmd := &cobra.Command{
		Use:   "up",
		Short: "Start the control plane and keep it up until interrupted",
		Long: `Start a real kube-apiserver and etcd on loopback, write an admin kubeconfig
and keep them running until Ctrl-C, then stop them and remove the kubeconfig.
The binaries are built first when they are missing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return up.Run(cmd.Context(), out) },
	}
	upCmd.Flags().StringVar(&up.KubeconfigPath, "kubeconfig", filepath.Join(".vigil", "kubeconfig"), "where to write the admin kubeconfig")
	upCmd.Flags().BoolVar(&up.Verbose, "verbose", false, "show the API server's and etcd's own logs")
	cmdutil.AddKubernetesFlag(upCmd.Flags(), &up.Kubernetes, "the control plane")
	cmd.AddCommand(upCmd)
	return cmd
}

// EnvOptions are the options of `vigil controlplane env`.
type EnvOptions struct {
	Kubernetes cmdutil.KubernetesFlag
	Progress   io.Writer
}

// Run prints the binaries' folder.
func (o *EnvOptions) Run(ctx context.Context, out io.Writer) error {
	r, err := o.Kubernetes.Release()
	if err != nil {
		return err
	}
	dir, err := controlplane.Ensure(ctx, r, o.Progress)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(out, dir)
	return err
}

// UpOptions are the options of `vigil controlplane up`.
type UpOptions struct {
	KubeconfigPath string
	Verbose        bool
	Kubernetes     cmdutil.KubernetesFlag
	Progress       io.Writer
	// Ready, when set, is called once the control plane serves and the
	// kubeconfig is written.
	Ready func(kubeconfig string)
}

// Run starts the control plane and blocks until ctx ends.
func (o *UpOptions) Run(ctx context.Context, out io.Writer) error {
	if o.KubeconfigPath == "" {
		return errors.New("--kubeconfig: expected a file path, got an empty string")
	}
	path, err := filepath.Abs(o.KubeconfigPath)
	if err != nil {
		return err
	}
	r, err := o.Kubernetes.Release()
	if err != nil {
		return err
	}
	dir, err := controlplane.Ensure(ctx, r, o.Progress)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Progress, "vigil: starting kube-apiserver and etcd %s from %s\n", r.Kubernetes, dir)
	began := time.Now()
	opts := controlplane.StartOptions{Release: r, Dir: dir}
	if o.Verbose {
		opts.Output = o.Progress
	}
	cp, err := controlplane.Start(opts)
	if err != nil {
		return err
	}
	defer func() {
		fmt.Fprintln(o.Progress, "vigil: stopping the control plane")
		if err := cp.Stop(); err != nil {
			fmt.Fprintf(o.Progress, "vigil: stop control plane: %v\n", err)
		}
	}()
	kubeconfig, err := cp.KubeConfig("vigil-admin", "system:masters")
	if err != nil {
		return err
	}
	headline := fmt.Sprintf("control plane up in %s: %s", time.Since(began).Round(time.Millisecond), cp.Config.Host)
	return serveUntilDone(ctx, out, headline, path, kubeconfig, dir, o.Ready)
}

// serveUntilDone writes the admin kubeconfig to path, says how to use it,
// calls ready (when set) and waits for ctx to end, then removes the file:
// the foreground of `vigil controlplane up` and `vigil node up`.
func serveUntilDone(ctx context.Context, out io.Writer, headline, path string, kubeconfig []byte, binDir string, ready func(string)) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create kubeconfig folder: %w", err)
	}
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	defer os.Remove(path)
	fmt.Fprintln(out, headline)
	fmt.Fprintf(out, "kubeconfig: %s\n", path)
	fmt.Fprintf(out, "kubectl:    %s\n", filepath.Join(binDir, "kubectl"))
	fmt.Fprintf(out, "\nexport KUBECONFIG=%s\n\n", path)
	fmt.Fprintln(out, "Press Ctrl-C to stop.")
	if ready != nil {
		ready(path)
	}
	<-ctx.Done()
	return nil
}
