package cli

import (
	"github.com/spf13/pflag"

	"github.com/vigilkit/vigil/internal/kubeversion"
)

// kubernetesFlag is --kubernetes: a supported release, parsed as the flag is
// read, so that a version outside the range fails before anything runs,
// listing the supported ones.
type kubernetesFlag struct {
	release kubeversion.Release
	set     bool
}

func (f *kubernetesFlag) String() string {
	if !f.set {
		return ""
	}
	return f.release.String()
}

func (f *kubernetesFlag) Set(s string) error {
	r, err := kubeversion.Parse(s)
	if err != nil {
		return err
	}
	f.release, f.set = r, true
	return nil
}

func (f *kubernetesFlag) Type() string { return "version" }

// Release is the release given, else $VIGIL_KUBERNETES_VERSION's, else the
// default.
func (f *kubernetesFlag) Release() (kubeversion.Release, error) {
	if f.set {
		return f.release, nil
	}
	return kubeversion.FromEnv()
}

// addKubernetesFlag declares --kubernetes on fs.
func addKubernetesFlag(fs *pflag.FlagSet, f *kubernetesFlag, what string) {
	fs.Var(f, "kubernetes", "the Kubernetes release of "+what+": one of "+kubeversion.Names()+" (default $"+kubeversion.Env+", else "+kubeversion.Default().String()+")")
}
