package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vigilkit/vigil/internal/commands/cmdutil"
	"github.com/vigilkit/vigil/vigiltest"
)

func vigilDev(t *testing.T, args ...string) (code int, out, errOut string) {
	t.Helper()
	var o, e vigiltest.Buffer
	code = Execute(context.Background(), append([]string{"dev", "--kubeconfig", "/nonexistent/kubeconfig"}, args...), &o, &e)
	return code, o.String(), e.String()
}

// vigil dev refuses what is not a module, and a module whose definition has
// mistakes, before it touches a cluster: exit code 1, the reason, and for a
// definition mistake the file and line that made it.
func TestDevBadInput(t *testing.T) {
	notGo := t.TempDir()
	if err := os.WriteFile(filepath.Join(notGo, "README.md"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	testdata, err := filepath.Abs(filepath.Join("testdata", "dev"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
		want       []string
	}{
		{"missing folder", filepath.Join(notGo, "missing"), []string{"not a vigil module", "no such file or directory"}},
		{"folder without Go", notGo, []string{"not a vigil module", "is not a Go package in a Go module", "go.mod file not found"}},
		{"library package", filepath.Join(testdata, "library"), []string{"not a vigil module", "is package library, not a main package"}},
		{"definition mistake", filepath.Join(testdata, "badmodule"), []string{
			"module badmodule has definition mistakes",
			`main.go:9: capability name "Not_A_Label"`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := vigilDev(t, tc.path)
			if code != cmdutil.ExitFailed {
				t.Errorf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", code, cmdutil.ExitFailed, out, errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut)
				}
			}
			if !strings.HasPrefix(errOut, "vigil: ") {
				t.Errorf("stderr does not start with the error:\n%s", errOut)
			}
		})
	}
}

// vigil dev --clean needs a cluster to clean: without --kubeconfig or
// KUBECONFIG it refuses at once rather than start an embedded control plane,
// which would hold nothing.
func TestDevCleanNeedsACluster(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	var o, e vigiltest.Buffer
	code := Execute(context.Background(), []string{"dev", "--clean", filepath.Join("testdata", "dev", "leftover")}, &o, &e)
	if code != cmdutil.ExitFailed || !strings.Contains(e.String(), "--clean needs the cluster: give --kubeconfig or set KUBECONFIG") {
		t.Errorf("exit code %d, want %d with the reason\nstdout:\n%s\nstderr:\n%s", code, cmdutil.ExitFailed, o.String(), e.String())
	}
}
