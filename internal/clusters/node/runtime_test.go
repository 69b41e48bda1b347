package node

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// preflightChild makes the test binary run Preflight and print its error:
// the child a test starts as another user.
const preflightChild = "VIGIL_NODE_PREFLIGHT_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(preflightChild) != "" {
		if err := Preflight(); err != nil {
			fmt.Println(err)
			if errors.Is(err, ErrCannotRun) {
				os.Exit(3)
			}
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// A user without root is told what the node needs and how to run it, not
// left to fail halfway through making a bridge. Run as root, the test
// starts itself as nobody (65534).
func TestPreflightRefusesAUserWithoutRoot(t *testing.T) {
	out, code := "", 0
	if os.Geteuid() != 0 {
		err := Preflight()
		if err == nil {
			t.Fatal("Preflight passed for a user without root")
		}
		out, code = err.Error(), 3
	} else {
		// nobody must be able to execute the test binary: copy it where
		// it may.
		dir, err := os.MkdirTemp("", "vigil-preflight-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		self, err := os.ReadFile(os.Args[0])
		if err != nil {
			t.Fatal(err)
		}
		bin := filepath.Join(dir, "node.test")
		if err := os.WriteFile(bin, self, 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(), preflightChild+"=1")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		b, err := cmd.CombinedOutput()
		out = string(b)
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("run the preflight as nobody: %v", err)
		}
	}
	if code != 3 {
		t.Fatalf("Preflight as a user without root: exit %d, %q; want ErrCannotRun", code, out)
	}
	for _, want := range []string{"needs root", "run it as root"} {
		if !strings.Contains(out, want) {
			t.Errorf("Preflight's refusal %q does not say %q", out, want)
		}
	}
}
