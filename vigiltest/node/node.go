package node

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"k8s.io/client-go/rest"

	"github.com/vigilkit/vigil/internal/clusters/controlplane"
	"github.com/vigilkit/vigil/internal/clusters/kubeversion"
	clusternode "github.com/vigilkit/vigil/internal/clusters/node"
	"github.com/vigilkit/vigil/internal/shipping/image"
	"github.com/vigilkit/vigil/vigiltest"
)

// Start starts a node and the control plane that serves it, for
// vigiltest.Options.Node: the release's control plane (built when missing
// with o.Build), its node binaries and, where the release needs it,
// containerd 2.x (built into vigil's cache when missing, with progress on
// stderr), then the runtime, etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, the kubelet and kube-proxy. It returns once the node is
// Ready. It needs root and runs one node per machine.
func Start(o vigiltest.NodeOptions) (vigiltest.Node, error) {
	release, err := kubeversion.Parse(o.KubernetesVersion)
	if err != nil {
		return nil, fmt.Errorf("vigiltest/node: %w", err)
	}
	ctx := context.Background()
	cpDir, err := controlplane.FindBinaries(release)
	if err != nil && o.Build {
		cpDir, err = controlplane.Ensure(ctx, release, os.Stderr)
	}
	if err != nil {
		return nil, fmt.Errorf("vigiltest/node: %w", err)
	}
	nodeDir, err := controlplane.EnsureNode(ctx, release, os.Stderr)
	if err != nil {
		return nil, fmt.Errorf("vigiltest/node: %w", err)
	}
	containerdDir, err := controlplane.EnsureContainerd(ctx, release, os.Stderr)
	if err != nil {
		return nil, fmt.Errorf("vigiltest/node: %w", err)
	}
	n, err := clusternode.Start(ctx, clusternode.Options{APIServerFlags: controlplane.ServingFlags(release), ControlPlaneDir: cpDir, NodeDir: nodeDir, ContainerdDir: containerdDir, Progress: os.Stderr, Output: o.Output})
	if err != nil {
		return nil, fmt.Errorf("vigiltest/node: %w", err)
	}
	return &running{n: n, binDir: cpDir}, nil
}

// running is a started node.
type running struct {
	n      *clusternode.Node
	binDir string
}

func (r *running) Config() *rest.Config { return rest.CopyConfig(r.n.Config) }
func (r *running) Kubeconfig() string   { return r.n.Kubeconfig }
func (r *running) BinDir() string       { return r.binDir }
func (r *running) Stop() error          { return r.n.Stop() }

func (r *running) Check(ctx context.Context) error { return r.n.Check(ctx) }

func (r *running) EmptyDir(podUID, volume string) string { return r.n.EmptyDir(podUID, volume) }

// LoadModule builds the module in dir as `vigil image` does, for this
// machine's platform, loads it into the node's runtime as `vigil image
// --node` does, and returns its reference (REPO:TAG@sha256:…) and the module
// binary taken from it.
func (r *running) LoadModule(t testing.TB, dir string) (ref, binary string) {
	t.Helper()
	began := time.Now()
	res, err := image.Build(t.Context(), image.Options{Dir: dir, Platforms: []v1.Platform{{OS: "linux", Architecture: runtime.GOARCH}}, Log: io.Discard})
	if err != nil {
		t.Fatalf("vigiltest/node: build the image of %s: %v", dir, err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag("vigiltest.local/" + strings.ToLower(filepath.Base(abs)) + ":test")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	archive := filepath.Join(tmp, "image.tar")
	if err := image.WriteTarball(res, archive, &tag); err != nil {
		t.Fatal(err)
	}
	if err := r.n.ImportImage(t.Context(), archive, tag.Name(), res.Digest.String()); err != nil {
		t.Fatalf("vigiltest/node: load the image into the node: %v", err)
	}
	binary = filepath.Join(tmp, "module")
	if err := image.ExtractBinary(res, binary); err != nil {
		t.Fatal(err)
	}
	if os.Getenv("VIGILTEST_VERBOSE") != "" {
		fmt.Fprintf(os.Stderr, "vigiltest/node: image %s built and loaded in %s\n", tag.Name(), time.Since(began).Round(time.Millisecond))
	}
	return tag.Name() + "@" + res.Digest.String(), binary
}
