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
	"github.com/vigilkit/vigil/internal/clusters/node"
	"github.com/vigilkit/vigil/internal/commands/cmdutil"
)

func newNodeCommand(out, errOut io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Build and run a real node on this machine: a control plane, a kubelet, containerd and kube-proxy",
	}
	var envVersion cmdutil.KubernetesFlag
	envCmd := &cobra.Command{
		Use:   "env",
		Short: "Print the folder of the node binaries, building them first if needed",
		Long: `Print the folder holding kubelet, kube-proxy, kube-controller-manager and
kube-scheduler, building them from the Go module proxy first when they are
missing (about 2 minutes once the control plane has been built, which warms
the Go caches; cached afterwards), beside the control plane's binaries.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := envVersion.Release()
			if err != nil {
				return err
			}
			dir, err := controlplane.EnsureNode(cmd.Context(), r, errOut)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(out, dir)
			return err
		},
	}
	cmdutil.AddKubernetesFlag(envCmd.Flags(), &envVersion, "the node binaries to build")
	cmd.AddCommand(envCmd)
	up := &NodeUpOptions{Progress: errOut}
	upCmd := &cobra.Command{
		Use:   "up",
		Short: "Start a control plane and one node on this machine, and keep them up until interrupted",
		Long: `Start etcd, kube-apiserver, kube-controller-manager and kube-scheduler, and one
node: containerd (with runc and the CNI bridge plugin), a kubelet and kube-proxy.
Write an admin kubeconfig and keep everything running until Ctrl-C; then stop it
all and undo every change made to the machine (the bridge vigil0, iptables
rules, mounts, cgroups, kernel settings, the folder ` + node.DefaultDir + `). The same
happens if vigil dies: a reaper outlives it.

It needs Linux and root, and the cgroup controllers cpu, memory and pids. The
binaries are built from the Go module proxy when missing (the control plane
6 to 12 minutes cold, then the node's about 2); containerd, runc, the CNI
plugins, iptables and conntrack are installed with apt-get when missing.
Images reach the node without a registry: vigil image --node REF.`,
		Example: `  sudo -E vigil node up &
  export KUBECONFIG=.vigil/node.kubeconfig
  labeler manifests --image "$(vigil image ./examples/labeler --node vigil.local/labeler:1.0.0)" | kubectl apply -f -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return up.Run(cmd.Context(), out) },
	}
	upCmd.Flags().StringVar(&up.KubeconfigPath, "kubeconfig", filepath.Join(".vigil", "node.kubeconfig"), "where to write the admin kubeconfig")
	upCmd.Flags().BoolVar(&up.Verbose, "verbose", false, "show every component's own log")
	cmdutil.AddKubernetesFlag(upCmd.Flags(), &up.Kubernetes, "the control plane and the node")
	cmd.AddCommand(upCmd)
	return cmd
}

// NodeUpOptions are the options of `vigil node up`.
type NodeUpOptions struct {
	KubeconfigPath string
	Verbose        bool
	Kubernetes     cmdutil.KubernetesFlag
	Progress       io.Writer
	// Ready, when set, is called once the node is Ready and the kubeconfig
	// written.
	Ready func(kubeconfig string)
}

// Run starts the node and blocks until ctx ends, then stops it.
func (o *NodeUpOptions) Run(ctx context.Context, out io.Writer) error {
	if o.KubeconfigPath == "" {
		return errors.New("--kubeconfig: expected a file path, got an empty string")
	}
	path, err := filepath.Abs(o.KubeconfigPath)
	if err != nil {
		return err
	}
	if err := node.Preflight(); err != nil {
		return err
	}
	r, err := o.Kubernetes.Release()
	if err != nil {
		return err
	}
	cp, err := controlplane.Ensure(ctx, r, o.Progress)
	if err != nil {
		return err
	}
	nodeBin, err := controlplane.EnsureNode(ctx, r, o.Progress)
	if err != nil {
		return err
	}
	containerdDir, err := controlplane.EnsureContainerd(ctx, r, o.Progress)
	if err != nil {
		return err
	}
	began := time.Now()
	opts := node.Options{ControlPlaneDir: cp, NodeDir: nodeBin, ContainerdDir: containerdDir, Progress: o.Progress, APIServerFlags: controlplane.ServingFlags(r)}
	if o.Verbose {
		opts.Output = o.Progress
	}
	n, err := node.Start(ctx, opts)
	if err != nil {
		return err
	}
	defer func() {
		fmt.Fprintln(o.Progress, "vigil: stopping the node and undoing its changes to the machine")
		if err := n.Stop(); err != nil {
			fmt.Fprintf(o.Progress, "vigil: %v\n", err)
		}
	}()
	data, err := os.ReadFile(n.Kubeconfig)
	if err != nil {
		return err
	}
	headline := fmt.Sprintf("node %s Ready in %s: %s", n.Name, time.Since(began).Round(time.Millisecond), n.Config.Host)
	return serveUntilDone(ctx, out, headline, path, data, cp, o.Ready)
}
