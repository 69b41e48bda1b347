package controlplane

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/vigilkit/vigil/internal/clusters/k8sbuild"
	"github.com/vigilkit/vigil/internal/clusters/kubeversion"
)

// EnvAssets is envtest's variable naming a folder of control-plane binaries; when
// set, it wins over the cache.
const EnvAssets = "KUBEBUILDER_ASSETS"

// BuildHint is the command that builds a release's binaries, for error
// messages.
func BuildHint(r kubeversion.Release) string {
	return "go run github.com/vigilkit/vigil/cmd/vigil controlplane env --kubernetes " + r.String()
}

// Client-side rate limits of the admin config. client-go's default (5 QPS, burst
// 10) throttles a test that creates a few hundred objects to minutes; a local API
// server has no other tenants to protect.
const (
	DefaultQPS   = 1000
	DefaultBurst = 2000
)

// FindBinaries returns the folder of the control-plane binaries of release
// r: $KUBEBUILDER_ASSETS when set, provided its kube-apiserver is of r's
// minor version (the flags and kinds vigil chooses for r would be wrong
// for another), otherwise r's cache folder. It does not build; the error
// says how to.
func FindBinaries(r kubeversion.Release) (string, error) {
	if dir := os.Getenv(EnvAssets); dir != "" {
		if err := k8sbuild.Check(dir); err != nil {
			return "", fmt.Errorf("%w (from %s); unset it to use vigil's cache, or build into the cache with: %s", err, EnvAssets, BuildHint(r))
		}
		minor, version, err := apiServerMinor(dir)
		if err != nil {
			return "", fmt.Errorf("%s=%s: %w", EnvAssets, dir, err)
		}
		if minor != r.Minor {
			return "", fmt.Errorf("%s=%s holds kube-apiserver %s, expected Kubernetes %s: set %s=1.%d to test on it, or unset %s to use vigil's cache of %s",
				EnvAssets, dir, version, r, kubeversion.Env, minor, EnvAssets, r)
		}
		return dir, nil
	}
	dir, err := k8sbuild.Dir(r)
	if err != nil {
		return "", err
	}
	if err := k8sbuild.Check(dir); err != nil {
		return "", fmt.Errorf("%w.\nBuild Kubernetes %s once (6 to 12 minutes on 2 cores, cached afterwards) with:\n    %s\nor, in a clone of vigil, `make control-plane KUBERNETES=%s`; or set %s to a folder holding kube-apiserver, etcd and kubectl", err, r, BuildHint(r), r, EnvAssets)
	}
	return dir, nil
}

// Ensure returns the folder of release r's control-plane binaries: found as
// FindBinaries finds them, or else built into the cache with progress.
func Ensure(ctx context.Context, r kubeversion.Release, progress io.Writer) (string, error) {
	if os.Getenv(EnvAssets) != "" {
		return FindBinaries(r)
	}
	return k8sbuild.Ensure(ctx, k8sbuild.BuildOptions{Release: r, Progress: progress})
}

// EnsureNode returns the folder of release r's node binaries (kubelet,
// kube-proxy, kube-controller-manager, kube-scheduler), built into the
// cache beside the control plane's when missing.
func EnsureNode(ctx context.Context, r kubeversion.Release, progress io.Writer) (string, error) {
	return k8sbuild.EnsureNode(ctx, k8sbuild.BuildOptions{Release: r, Progress: progress})
}

// EnvContainerd chooses the containerd a node runs: "package" (the
// machine's, Debian's containerd 1.6 here) or "built" (k8sbuild.Containerd,
// built from the Go module proxy). Unset, a node runs the package through
// 1.37 and the built 2.x from 1.38, whose kubelet needs it.
const EnvContainerd = "VIGIL_NODE_CONTAINERD"

// EnsureContainerd returns the folder of the built containerd a node of
// release r runs (building it into the cache when missing), or "" when the
// node runs the machine's containerd package: see EnvContainerd.
func EnsureContainerd(ctx context.Context, r kubeversion.Release, progress io.Writer) (string, error) {
	switch c := os.Getenv(EnvContainerd); c {
	case "package":
		if r.AtLeast(38) {
			return "", fmt.Errorf("%s=package: the kubelet of Kubernetes %s needs containerd 2.x, which the package is not: unset %s, or set it to built", EnvContainerd, r, EnvContainerd)
		}
		return "", nil
	case "built":
	case "":
		if !r.AtLeast(38) {
			return "", nil
		}
	default:
		return "", fmt.Errorf("%s=%q: expected package (the machine's containerd) or built (containerd %s from the Go module proxy)", EnvContainerd, c, k8sbuild.Containerd)
	}
	return k8sbuild.EnsureContainerd(ctx, k8sbuild.BuildOptions{Release: r, Progress: progress})
}

// ServingFlags are the kube-apiserver flags that make release r serve every
// kind vigil can use: the gated versions of MutatingAdmissionPolicy
// (v1alpha1 on 1.33, v1beta1 on 1.34 and 1.35) are turned on, as a platform
// that uses vigil.NamespaceProvenance on those releases must.
func ServingFlags(r kubeversion.Release) map[string]string {
	switch {
	case r.AtLeast(36):
		return nil
	case r.AtLeast(34):
		return map[string]string{"feature-gates": "MutatingAdmissionPolicy=true", "runtime-config": "admissionregistration.k8s.io/v1beta1=true"}
	default:
		return map[string]string{"feature-gates": "MutatingAdmissionPolicy=true", "runtime-config": "admissionregistration.k8s.io/v1alpha1=true"}
	}
}

// StartOptions configures Start.
type StartOptions struct {
	// Release is the Kubernetes release to run; when zero, the one
	// $VIGIL_KUBERNETES_VERSION names, else kubeversion.Default(). Its
	// gated kinds are served (ServingFlags) unless APIServerFlags set
	// feature-gates or runtime-config themselves.
	Release kubeversion.Release
	// Dir holds the binaries; FindBinaries(Release) when empty.
	Dir string
	// DisableWatchCache turns the API server's watch cache off, so that a watch
	// resumed from a compacted revision gets 410 Gone instead of being replayed
	// from the cache's history.
	DisableWatchCache bool
	// APIServerFlags are set on the kube-apiserver command line (name without
	// dashes → value), after ServingFlags; an empty value removes the flag.
	APIServerFlags map[string]string
	// CRDs and CRDPaths (files or folders of YAML) are installed, and waited for,
	// before Start returns.
	CRDs     []*apiextensionsv1.CustomResourceDefinition
	CRDPaths []string
	// QPS and Burst of the returned config; DefaultQPS and DefaultBurst when zero.
	QPS   float32
	Burst int
	// Output receives the API server's and etcd's logs; nil discards them.
	Output io.Writer
}

// Instance is a running control plane.
type Instance struct {
	// Config is an admin (system:masters) config for the API server.
	Config *rest.Config
	// Dir is the folder the binaries were run from.
	Dir string
	// Release is the Kubernetes release running.
	Release kubeversion.Release

	env *envtest.Environment
}

// Start starts etcd and kube-apiserver and waits until the API server serves the
// default namespace and the given CRDs.
func Start(opts StartOptions) (*Instance, error) {
	if opts.Release == (kubeversion.Release{}) {
		r, err := kubeversion.FromEnv()
		if err != nil {
			return nil, err
		}
		opts.Release = r
	}
	dir := opts.Dir
	if dir == "" {
		var err error
		if dir, err = FindBinaries(opts.Release); err != nil {
			return nil, err
		}
	} else if err := k8sbuild.Check(dir); err != nil {
		return nil, err
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: dir,
		CRDs:                  opts.CRDs,
		CRDDirectoryPaths:     opts.CRDPaths,
		ErrorIfCRDPathMissing: true,
	}
	// envtest lets KUBEBUILDER_ASSETS override BinaryAssetsDirectory; pin the
	// paths so the folder chosen here is the one that runs.
	env.ControlPlane.GetAPIServer().Path = filepath.Join(dir, "kube-apiserver")
	env.ControlPlane.KubectlPath = filepath.Join(dir, "kubectl")
	etcd := &envtest.Etcd{Path: filepath.Join(dir, "etcd")}
	env.ControlPlane.Etcd = etcd
	args := env.ControlPlane.GetAPIServer().Configure()
	if opts.DisableWatchCache {
		args.Set("watch-cache", "false")
	}
	for k, v := range ServingFlags(opts.Release) {
		args.Set(k, v)
	}
	for k, v := range opts.APIServerFlags {
		if v == "" {
			args.Disable(k)
			continue
		}
		args.Set(k, v)
	}
	if opts.Output != nil {
		api := env.ControlPlane.GetAPIServer()
		api.Out, api.Err = opts.Output, opts.Output
		etcd.Out, etcd.Err = opts.Output, opts.Output
	}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("start control plane from %s: %w", dir, err)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = DefaultQPS, DefaultBurst
	if opts.QPS > 0 {
		cfg.QPS = opts.QPS
	}
	if opts.Burst > 0 {
		cfg.Burst = opts.Burst
	}
	return &Instance{Config: cfg, Dir: dir, Release: opts.Release, env: env}, nil
}

// EtcdURL is the client URL of the instance's etcd.
func (i *Instance) EtcdURL() *url.URL { return i.env.ControlPlane.Etcd.URL }

// Environment exposes the underlying envtest environment for what this package
// does not wrap.
func (i *Instance) Environment() *envtest.Environment { return i.env }

// KubeConfig returns a kubeconfig for a new user of the given name and groups,
// authenticated by a client certificate.
func (i *Instance) KubeConfig(user string, groups ...string) ([]byte, error) {
	u, err := i.env.AddUser(envtest.User{Name: user, Groups: groups}, nil)
	if err != nil {
		return nil, fmt.Errorf("add user %q: %w", user, err)
	}
	return u.KubeConfig()
}

// Stop stops the API server and etcd and removes their data.
func (i *Instance) Stop() error { return i.env.Stop() }
