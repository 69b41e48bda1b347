package v1alpha1_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/vigilkit/vigil/store/v1alpha1"
)

// controllerGen is the pinned generator; the Makefile's `generate` uses the same.
const controllerGen = "sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0"

// The checked-in CRD is what controller-gen makes of the Go types today.
func TestCRDMatchesGoTypes(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds controller-gen (minutes on a cold cache)")
	}
	out := t.TempDir()
	cmd := exec.CommandContext(t.Context(), "go", "run", controllerGen, "crd:crdVersions=v1", "paths=.", "output:crd:dir="+out)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("controller-gen: %v\n%s", err, msg)
	}
	got, err := os.ReadFile(filepath.Join(out, "vigil.dev_stores.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, v1alpha1.CRDYAML) {
		t.Fatalf("crd/vigil.dev_stores.yaml is out of date with types.go: run `make generate` and commit the result\n--- generated ---\n%s", got)
	}
}
