package k8sbuild

import (
	"context"
	"os"
	"path/filepath"
	"strings"

	"github.com/vigilkit/vigil/internal/clusters/kubeversion"
)

// Kwok is the kwok that simulates nodes and pods for `make bench-scale`:
// the Kubernetes SIGs' simulator, which plays each node's and pod's status
// against a real API server with no kubelet and no containers.
const Kwok = "v0.8.0"

const kwokModule = "sigs.k8s.io/kwok"

var kwokSet = binarySet{
	key:      func(kubeversion.Release) string { return "kwok-" + Kwok },
	binaries: []string{"kwok"},
	what:     func(kubeversion.Release) string { return "kwok " + Kwok },
	cold:     "a cold build takes 2 to 5 minutes on 2 cores",
	build:    (*builder).buildKwok,
}

// EnsureKwok returns the folder holding the kwok binary, built as Ensure
// builds the control plane: from the Go module proxy, under a lock, into a
// cache folder of its own (kwok-<version> beside the control planes'). It
// does not depend on opts.Release.
func EnsureKwok(ctx context.Context, opts BuildOptions) (string, error) {
	return ensure(ctx, opts, kwokSet)
}

func (b *builder) buildKwok(ctx context.Context, work, bin string) error {
	b.step(1, 3, "resolving %s@%s", kwokModule, Kwok)
	dir := filepath.Join(work, "kwok")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module vigil.local/bench/kwok\n\ngo 1.26\n"), 0o644); err != nil {
		return err
	}
	if _, err := b.run(ctx, dir, "kwok", "go", "get", kwokModule+"/cmd/kwok@"+Kwok); err != nil {
		return err
	}
	b.step(2, 3, "building kwok %s", Kwok)
	if _, err := b.run(ctx, dir, "kwok", "go", "build", "-trimpath", "-v", "-o", bin+string(filepath.Separator), kwokModule+"/cmd/kwok"); err != nil {
		return err
	}
	b.step(3, 3, "checking the binary's version")
	return checkVersions(ctx, bin, []versionCheck{{"kwok", []string{"--version"}, strings.TrimPrefix(Kwok, "v")}})
}
