package modcli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vigilkit/vigil/internal/commands/cmdutil"
	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/operating/deadlock"
	"github.com/vigilkit/vigil/internal/shipping/manifests"
)

func manifestsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "manifests --image IMAGE",
		Short: "Print the module's Kubernetes objects, with RBAC derived from its definition",
		Long: `Print (or write into -o DIR, one file per object) everything the module needs
in a cluster, derived from its definition: Namespace, a ServiceAccount for the
admission pod and one for the watcher, Roles and ClusterRoles giving each
exactly the rules its gates, bindings, listers, Store, leader election and
registration use (see plan for why each is there), the Store CRD,
the admission Deployment with one init container per gate phase (gate-phase-N,
ascending), the watcher Deployment (every container with GOMEMLIMIT at 90% of
its memory limit), Services (the admission role's metrics among them), PodDisruptionBudgets, the
admission pods' NetworkPolicy, the empty
webhook configurations that registration fills once the module is ready, and
full ones for fail-closed capabilities. The same module and flags always print
the same bytes.`,
	}
}

// ManifestsFlags are the flags of `<module> manifests`.
type ManifestsFlags struct {
	Image         string
	Namespace     string
	Replicas      int32
	Dir           string
	CABundleFile  string
	AllowDeadlock bool
	With          []string
	// NetworkPolicy ships the admission pods' NetworkPolicy.
	NetworkPolicy bool
	// Kubernetes is the release the manifests are for.
	Kubernetes cmdutil.KubernetesFlag
	// Memory gives the roles' memory limits.
	Memory memoryFlags
	// Ignored are namespaces the install adds to the module's ignored ones.
	Ignored []string
}

// NewManifestsFlags returns the flags.
func NewManifestsFlags() *ManifestsFlags { return &ManifestsFlags{} }

// AddFlags declares the flags.
func (f *ManifestsFlags) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.Image, "image", "", "the module's container image (required), best by digest as `vigil image --push` prints it: REPO:TAG@sha256:...")
	fs.StringVar(&f.Namespace, "namespace", "", "the namespace the module runs in, checked against the definition's (render for another with VIGIL_NAMESPACE=NAME, which the definition resolves)")
	fs.Int32Var(&f.Replicas, "replicas", 2, "replicas of the admission and watcher Deployments")
	fs.StringVarP(&f.Dir, "output-dir", "o", "", "write one file per object into this folder instead of printing")
	fs.StringVar(&f.CABundleFile, "ca-bundle", "", "PEM CA bundle for the fail-closed webhook configurations (default: the module fills it in once it serves)")
	fs.BoolVar(&f.AllowDeadlock, "allow-deadlock", false, "print even when plan finds a startup deadlock")
	fs.StringSliceVar(&f.With, "with", nil, "other modules' `plan -o json` files, for the deadlock analysis across modules")
	cmdutil.AddKubernetesFlag(fs, &f.Kubernetes, "the cluster the manifests are for (the version of each kind whose version depends on it)")
	fs.BoolVar(&f.NetworkPolicy, "network-policy", true, "ship the admission pods' NetworkPolicy (webhook port from anywhere, metrics from the monitoring namespace, nothing else); false where the cluster enforces none")
	f.Memory.addFlags(fs, false)
	fs.StringSliceVar(&f.Ignored, "ignore-namespace", nil, "a namespace the install keeps the module away from besides its Options.IgnoredNamespaces: its roles get it as --ignore-namespace, its policies skip it (repeatable)")
}

// ToOptions reads the CA bundle and the other modules and checks the
// replicas.
func (f *ManifestsFlags) ToOptions(m *spec.Module, out io.Writer) (*ManifestsOptions, error) {
	release, err := f.Kubernetes.Release()
	if err != nil {
		return nil, fmt.Errorf("--kubernetes: %w", err)
	}
	if err := checkIgnored(m, f.Ignored); err != nil {
		return nil, err
	}
	o := &ManifestsOptions{Module: m, Out: out, Dir: f.Dir, AllowDeadlock: f.AllowDeadlock,
		Render: manifests.Options{Image: f.Image, Namespace: f.Namespace, Replicas: f.Replicas, NoNetworkPolicy: !f.NetworkPolicy, Kubernetes: release, IgnoredNamespaces: f.Ignored,
			AdmissionMemory: f.Memory.Admission, WatcherMemory: f.Memory.Watcher}}
	if f.CABundleFile != "" {
		data, err := os.ReadFile(f.CABundleFile)
		if err != nil {
			return nil, fmt.Errorf("--ca-bundle: %w", err)
		}
		o.Render.CABundle = data
	}
	if f.Replicas < 1 {
		return nil, fmt.Errorf("--replicas %d: expected 1 or more (2 keeps the webhooks up through a node's loss)", f.Replicas)
	}
	others, err := readOtherModules(f.With)
	if err != nil {
		return nil, err
	}
	o.Others = others
	return o, nil
}

// ManifestsOptions are a rendering of the module's objects.
type ManifestsOptions struct {
	Module *spec.Module
	Out    io.Writer
	Render manifests.Options
	// Dir, when set, receives one file per object instead of Out.
	Dir string
	// AllowDeadlock renders even when the analysis finds a deadlock.
	AllowDeadlock bool
	// Others are the modules the deadlock analysis spans besides this one.
	Others []deadlock.Module
}

// Run renders the module's objects, unless they would deadlock.
func (o *ManifestsOptions) Run(context.Context) error {
	m := o.Module
	if cycles := findDeadlocks(m, o.Others); len(cycles) > 0 && !o.AllowDeadlock {
		var b strings.Builder
		_ = writeDeadlocks(&b, cycles, o.Others)
		return fmt.Errorf("%w: refusing to print manifests that would never become ready (--allow-deadlock prints them anyway):%s", ErrDeadlock, strings.TrimRight(b.String(), "\n"))
	}
	objs, err := manifests.Render(m, o.Render)
	if err != nil {
		return err
	}
	if o.Dir == "" {
		data, err := manifests.YAML(objs)
		if err != nil {
			return err
		}
		_, err = o.Out.Write(data)
		return err
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return err
	}
	for i, obj := range objs {
		data, err := manifests.YAML(objs[i : i+1])
		if err != nil {
			return err
		}
		path := filepath.Join(o.Dir, manifests.FileName(i, obj))
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return err
		}
		fmt.Fprintln(o.Out, path)
	}
	return nil
}
