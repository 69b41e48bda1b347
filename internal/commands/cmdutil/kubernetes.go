package cmdutil

import (
	"github.com/spf13/pflag"

	"github.com/vigilkit/vigil/internal/clusters/kubeversion"
)

// KubernetesFlag is --kubernetes: a supported release, parsed as the flag is
// read, so that a version outside the range fails before anything runs,
// listing the supported ones. Its zero value is unset.
type KubernetesFlag struct {
	release kubeversion.Release
	set     bool
}

func (f *KubernetesFlag) String() string {
	if !f.set {
		return ""
	}
	return f.release.String()
}

func (f *KubernetesFlag) Set(s string) error {
	r, err := kubeversion.Parse(s)
	if err != nil {
		return err
	}
	f.release, f.set = r, true
	return nil
}

func (f *KubernetesFlag) Type() string { return "version" }

// Release is the release given, else $VIGIL_KUBERNETES_VERSION's, else the
// default.
func (f *KubernetesFlag) Release() (kubeversion.Release, error) {
	if f.set {
		return f.release, nil
	}
	return kubeversion.FromEnv()
}

// Given reports whether the flag was set.
func (f *KubernetesFlag) Given() bool { return f.set }

// AddKubernetesFlag declares --kubernetes on fs.
func AddKubernetesFlag(fs *pflag.FlagSet, f *KubernetesFlag, what string) {
	fs.Var(f, "kubernetes", "the Kubernetes release of "+what+": one of "+kubeversion.Names()+" (default $"+kubeversion.Env+", else "+kubeversion.Default().String()+")")
}
