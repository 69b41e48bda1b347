package k8sbuild

import (
	"context"
	"os"
	"path/filepath"
	"strings"

	"github.com/vigilkit/vigil/internal/clusters/kubeversion"
)

// Containerd is the containerd a node runs when it does not use the
// machine's package: the 2.x line, which a kubelet after 1.37 needs (it
// drops the fallback for runtimes without the CRI RuntimeConfig call).
const Containerd = "v2.4.2"

// ContainerdBinaries are what a containerd folder holds: the daemon, the
// runc shim it starts per pod, and ctr, through which images are imported.
var ContainerdBinaries = []string{"containerd", "containerd-shim-runc-v2", "ctr"}

const containerdModule = "github.com/containerd/containerd/v2"

var containerdSet = binarySet{
	key:      func(kubeversion.Release) string { return "containerd-" + Containerd },
	binaries: ContainerdBinaries,
	what: func(kubeversion.Release) string {
		return "containerd " + Containerd + " (containerd, containerd-shim-runc-v2, ctr)"
	},
	cold:  "a cold build takes 2 to 6 minutes on 2 cores",
	build: (*builder).buildContainerd,
}

// EnsureContainerd returns the folder holding containerd Containerd
// (ContainerdBinaries), built as Ensure builds the control plane: from the
// Go module proxy, under a lock, into a cache folder of its own
// (containerd-<version> beside the control planes'). It does not depend on
// opts.Release.
func EnsureContainerd(ctx context.Context, opts BuildOptions) (string, error) {
	return ensure(ctx, opts, containerdSet)
}

// buildContainerd builds containerd without cgo: the btrfs and devmapper
// snapshotters, which need C headers, are left out (the node uses
// overlayfs).
func (b *builder) buildContainerd(ctx context.Context, work, bin string) error {
	b.step(1, 3, "resolving %s@%s", containerdModule, Containerd)
	dir := filepath.Join(work, "containerd")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module vigil.local/node/containerd\n\ngo 1.26\n"), 0o644); err != nil {
		return err
	}
	var cmds []string
	for _, n := range ContainerdBinaries {
		cmds = append(cmds, containerdModule+"/cmd/"+n)
	}
	get := []string{"go", "get"}
	for _, c := range cmds {
		get = append(get, c+"@"+Containerd)
	}
	if _, err := b.run(ctx, dir, "containerd", get...); err != nil {
		return err
	}
	b.step(2, 3, "building %s %s", strings.Join(ContainerdBinaries, ", "), Containerd)
	ldflags := "-X " + containerdModule + "/version.Version=" + Containerd
	build := append([]string{"go", "build", "-trimpath", "-v", "-tags", "no_btrfs no_devmapper", "-ldflags", ldflags, "-o", bin + string(filepath.Separator)}, cmds...)
	if _, err := b.run(ctx, dir, "containerd", build...); err != nil {
		return err
	}
	b.step(3, 3, "checking the binaries' versions")
	return checkVersions(ctx, bin, []versionCheck{
		{"containerd", []string{"--version"}, Containerd},
		{"ctr", []string{"--version"}, strings.TrimPrefix(Containerd, "v")},
		{"containerd-shim-runc-v2", []string{"-v"}, Containerd},
	})
}
