// Package testenv says which of vigil's own tests need the control plane
// (kube-apiserver and etcd) and decides, in one place, what a test that needs it
// does when it cannot have it:
//
//   - under `go test -short` it skips: -short means "only the tests that need no
//     control plane" (`make unit`);
//   - with no binaries found and CI unset it skips, saying how to build them;
//   - with CI=true and no binaries found it fails: a CI run that skipped every
//     API-server test would pass on nothing.
package testenv

import (
	"fmt"
	"os"
	"testing"

	"github.com/vigilkit/vigil/internal/clusters/controlplane"
	"github.com/vigilkit/vigil/internal/clusters/kubeversion"
)

// ControlPlane returns the folder of the control-plane binaries (what envtest
// calls KUBEBUILDER_ASSETS) of the release $VIGIL_KUBERNETES_VERSION names
// (the default when unset) for a test that needs the API server, or skips or
// fails the test as the package comment says.
func ControlPlane(t testing.TB) string {
	t.Helper()
	dir, skip, err := Lookup(testing.Short())
	switch {
	case err != nil:
		t.Fatal(err)
	case skip != "":
		t.Skip(skip)
	}
	return dir
}

// Lookup is ControlPlane for a TestMain, which has no testing.TB: it returns the
// binaries' folder, or a reason to skip the package's tests, or an error that
// must fail them. short is testing.Short() (parse the flags first).
func Lookup(short bool) (dir, skip string, err error) {
	if short {
		return "", "needs the control plane (kube-apiserver, etcd): skipped under -short", nil
	}
	r, err := kubeversion.FromEnv()
	if err != nil {
		return "", "", err
	}
	dir, err = controlplane.FindBinaries(r)
	if err == nil {
		return dir, "", nil
	}
	if CI() {
		return "", "", fmt.Errorf("needs the control plane and CI is set, so it fails rather than skips: %w", err)
	}
	return "", fmt.Sprintf("needs the control plane, not found (CI unset, so skipped; CI=true fails instead): %v", err), nil
}

// CI reports whether the tests run in CI (CI=true, as CI services set it).
func CI() bool {
	switch os.Getenv("CI") {
	case "", "0", "false", "False", "FALSE":
		return false
	}
	return true
}
