package cli

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vigilkit/vigil/internal/commands/cmdutil"
	"github.com/vigilkit/vigil/vigiltest"
)

// vigilRoot is the checkout these tests run in.
func vigilRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller information to find the checkout by")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

func vigilInit(t *testing.T, args ...string) (code int, out, errOut string) {
	t.Helper()
	var o, e vigiltest.Buffer
	code = Execute(context.Background(), append([]string{"init"}, args...), &o, &e)
	return code, o.String(), e.String()
}

// The scaffold builds, vets and passes its own test against the real API
// server at once, as CI checks: into an existing empty folder, with vigil
// replaced by this checkout.
func TestInitScaffoldBuildsAndPassesItsTest(t *testing.T) {
	dir := t.TempDir()
	began := time.Now()
	code, out, errOut := vigilInit(t, "shop-guard", "--vigil-path", vigilRoot(t), "--dir", dir)
	if code != 0 {
		t.Fatalf("vigil init exited %d:\n%s%s", code, out, errOut)
	}
	t.Logf("scaffolded in %s", time.Since(began).Round(time.Millisecond))
	for _, want := range []string{
		"created " + filepath.Join(dir, "go.mod"), "created " + filepath.Join(dir, "main.go"),
		"created " + filepath.Join(dir, "main_test.go"), "created " + filepath.Join(dir, "Makefile"),
		"created " + filepath.Join(dir, "README.md"), "created " + filepath.Join(dir, "testdata", "policies", "configmaps.yaml"),
		"go mod tidy", "make test",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	goMod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(vigilRoot(t))
	for _, want := range []string{"module example.com/shop-guard\n", "github.com/vigilkit/vigil v0.0.0-", "replace github.com/vigilkit/vigil => " + abs + "\n", "k8s.io/api v0.37", "tool github.com/vigilkit/vigil/cmd/vigil"} {
		if !strings.Contains(string(goMod), want) {
			t.Errorf("go.mod lacks %q:\n%s", want, goMod)
		}
	}
	if testing.Short() {
		t.Skip("-short: not building and testing the scaffold")
	}
	// Its policy cases pass from the command line too, without a cluster.
	for _, args := range [][]string{{"vet", "./..."}, {"test", "-count=1", "./..."}, {"run", ".", "test", "testdata/policies"}} {
		began := time.Now()
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		// KUBEBUILDER_ASSETS and CI pass through: the scaffold's test finds
		// the control plane as this one does.
		cmd.Env = append(os.Environ(), "GOWORK=off")
		output, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s in the scaffold: %v\n%s", strings.Join(args, " "), err, output)
		}
		t.Logf("go %s: %s", strings.Join(args, " "), time.Since(began).Round(time.Millisecond))
	}
}

// An existing folder that holds anything is refused, and left as it was.
func TestInitRefusesNonEmptyFolder(t *testing.T) {
	dir := t.TempDir()
	notes := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notes, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := vigilInit(t, "shop-guard", "--vigil-path", vigilRoot(t), "--dir", dir)
	if code != cmdutil.ExitFailed {
		t.Fatalf("exit %d, want %d:\n%s%s", code, cmdutil.ExitFailed, out, errOut)
	}
	for _, want := range []string{"folder " + dir + " is not empty (it holds notes.txt)", "vigil init never overwrites files", "pass --dir with a new folder"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("error lacks %q:\n%s", want, errOut)
		}
	}
	entries, _ := os.ReadDir(dir)
	if data, _ := os.ReadFile(notes); len(entries) != 1 || string(data) != "mine" {
		t.Fatalf("the folder was changed: %d entries, notes.txt %q", len(entries), data)
	}
}

// A NAME that cannot name the module's objects is refused before anything is
// written, with what was expected and a name that would do.
func TestInitRejectsInvalidName(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"Shop_Guard"}, []string{
			`NAME "Shop_Guard" is not a valid module name: expected a DNS-1123 label of at most 56 characters`,
			"got: a lowercase RFC 1123 label must consist of", `Pick a name such as "shop-guard"`}},
		{[]string{strings.Repeat("a", 57)}, []string{"is not a valid module name", "got: it has 57 characters"}},
		{[]string{"guard-"}, []string{`NAME "guard-" is not a valid module name`, `Pick a name such as "guard"`}},
		{nil, []string{"expected one argument, the module's name, as in `vigil init my-module`; got 0"}},
		{[]string{"shop-guard", "--module-path", "not a path"}, []string{`--module-path "not a path": expected a Go module path`}},
		{[]string{"shop-guard", "--vigil-path", t.TempDir()}, []string{"--vigil-path", "expected a checkout of vigil with its go.mod"}},
	} {
		dir := filepath.Join(t.TempDir(), "project")
		code, out, errOut := vigilInit(t, append(tc.args, "--dir", dir)...)
		if code != cmdutil.ExitFailed {
			t.Errorf("init %q: exit %d, want %d:\n%s%s", tc.args, code, cmdutil.ExitFailed, out, errOut)
		}
		for _, want := range tc.want {
			if !strings.Contains(errOut, want) {
				t.Errorf("init %q: error lacks %q:\n%s", tc.args, want, errOut)
			}
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("init %q created %s", tc.args, dir)
		}
	}
}
