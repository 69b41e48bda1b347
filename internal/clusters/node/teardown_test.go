package node

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The teardown is a shell script written before the node changes anything:
// it parses, names the node's folder and bridge, and restores each kernel
// setting to the value it had when it was written.
func TestTeardownRestoresWhatItFound(t *testing.T) {
	l := layout{dir: t.TempDir()}
	if err := writeTeardown(l, "/opt/node-bin"); err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile(l.path("teardown.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("/bin/sh", "-n", l.path("teardown.sh")).CombinedOutput(); err != nil {
		t.Fatalf("sh -n teardown.sh: %v %s\n%s", err, out, script)
	}
	for _, want := range []string{"dir=\"" + l.dir + "\"", "nodebin=\"/opt/node-bin\"", "ip link del " + bridgeName, "kube-proxy\" --cleanup", "umount -l"} {
		if !strings.Contains(string(script), want) {
			t.Errorf("teardown.sh lacks %q:\n%s", want, script)
		}
	}
	restored := 0
	for _, k := range kernelSettings {
		data, err := os.ReadFile(filepath.Join("/proc/sys", k))
		if err != nil {
			continue
		}
		want := "echo \"" + strings.TrimSpace(string(data)) + "\" > \"" + filepath.Join("/proc/sys", k) + "\""
		if !strings.Contains(string(script), want) {
			t.Errorf("teardown.sh does not restore %s as it is now: want %q in\n%s", k, want, script)
		}
		restored++
	}
	if restored == 0 {
		t.Fatal("no kernel setting readable here: the test checks nothing")
	}
	// Run on a folder that is gone, it does nothing and succeeds: a second
	// teardown after the first.
	gone := layout{dir: filepath.Join(t.TempDir(), "gone")}
	if err := os.MkdirAll(gone.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeTeardown(gone, "/opt/node-bin"); err != nil {
		t.Fatal(err)
	}
	moved := filepath.Join(t.TempDir(), "teardown.sh")
	if err := os.Rename(gone.path("teardown.sh"), moved); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(gone.dir); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("/bin/sh", moved).CombinedOutput(); err != nil {
		t.Fatalf("teardown of a folder already gone: %v %s", err, out)
	}
}

// A node whose vigil still runs is refused by the next start, not torn down
// under it as a leftover; once its owner is gone, the folder is a leftover.
func TestALiveNodeIsNotALeftover(t *testing.T) {
	l := layout{dir: t.TempDir()}
	if err := writeOwner(l); err != nil {
		t.Fatal(err)
	}
	marker := l.path("still-here")
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	n := &Node{layout: l, opts: Options{Progress: io.Discard}}
	err := n.clearLeftovers(t.Context())
	if !errors.Is(err, ErrCannotRun) || !strings.Contains(err.Error(), "already runs") {
		t.Fatalf("a start beside a live node: %v, want it refused as a node that already runs", err)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the live node's folder was touched: %v", err)
	}
	// The same PID with another start time is another process: the owner
	// is gone (its PID reused, say).
	if err := os.WriteFile(l.path("owner"), []byte(fmt.Sprintf("%d 1\n", os.Getpid())), 0o644); err != nil {
		t.Fatal(err)
	}
	if pid, alive := liveOwner(l); alive {
		t.Fatalf("owner %d with another start time counted as alive", pid)
	}
}
