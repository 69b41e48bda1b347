package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// vigil crds writes one file per CRD of the packages named, says which,
// and exits 1 with what to name when the packages hold no kind.
func TestCRDsCommandWritesTheTypesCRDs(t *testing.T) {
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	if code := Execute(context.Background(), []string{"crds", "-o", dir, "../../shipping/crdgen/testdata/api/..."}, &out, &errOut); code != 0 {
		t.Fatalf("vigil crds: exit %d\n%s", code, errOut.String())
	}
	file := filepath.Join(dir, "example.dev_widgets.yaml")
	if got := strings.TrimSpace(out.String()); got != "wrote "+file {
		t.Errorf("printed %q, want %q", got, "wrote "+file)
	}
	if data, err := os.ReadFile(file); err != nil || !bytes.Contains(data, []byte("name: widgets.example.dev")) {
		t.Errorf("%s: %v\n%s", file, err, data)
	}

	out.Reset()
	errOut.Reset()
	if code := Execute(context.Background(), []string{"crds", "-o", t.TempDir(), "."}, &out, &errOut); code != 1 ||
		!strings.Contains(errOut.String(), "+kubebuilder:object:root=true") {
		t.Errorf("vigil crds . (no kinds): exit %d, stderr:\n%s\nwant exit 1 naming the markers", code, errOut.String())
	}
}
