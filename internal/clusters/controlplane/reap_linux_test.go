package controlplane_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vigilkit/vigil/internal/clusters/controlplane"
	"github.com/vigilkit/vigil/internal/testsupport/testenv"
)

// reapChildEnv makes the test binary the parent of a control plane: it
// starts one, arms the reaper and prints the PIDs, then waits to be killed.
const reapChildEnv = "VIGIL_TEST_REAP_CHILD"

const reapOtherEnv = "VIGIL_TEST_REAP_OTHER"

func TestMain(m *testing.M) {
	if os.Getenv(reapChildEnv) == "1" {
		os.Exit(reapChild())
	}
	os.Exit(m.Run())
}

func reapChild() int {
	// With VIGIL_TEST_REAP_OTHER=1, a second control plane runs beside the
	// first, with no reaper of its own.
	if os.Getenv(reapOtherEnv) == "1" {
		other, err := controlplane.Start(controlplane.StartOptions{})
		if err != nil {
			fmt.Println("error", err)
			return 1
		}
		fmt.Println("other", other.Environment().ControlPlane.Etcd.DataDir, other.Environment().ControlPlane.GetAPIServer().CertDir)
	}
	cp, err := controlplane.Start(controlplane.StartOptions{})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	if _, err := cp.ReapOnExit(); err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("dirs", cp.Environment().ControlPlane.Etcd.DataDir, cp.Environment().ControlPlane.GetAPIServer().CertDir)
	for _, p := range childPIDs() {
		fmt.Println("pid", p)
	}
	fmt.Println("ready")
	time.Sleep(time.Hour)
	return 0
}

func childPIDs() []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid(pid) == os.Getpid() {
			out = append(out, pid)
		}
	}
	return out
}

func ppid(pid int) int {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	n, _ := strconv.Atoi(fields[1])
	return n
}

// alive reports whether pid runs: a zombie that no init reaps is gone.
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return fields[0] != "Z" && fields[0] != "X"
}

// A SIGKILLed parent takes its control plane with it: kube-apiserver and
// etcd, which envtest starts in process groups of their own, and their
// folders.
func TestReapOnExitKillsTheControlPlaneWithAKilledParent(t *testing.T) {
	testenv.ControlPlane(t)
	c := startReapChild(t, false)
	if len(c.cp) != 2 || len(c.dirs) != 2 {
		t.Fatalf("child reported control-plane PIDs %v and folders %v; want kube-apiserver's and etcd's", c.cp, c.dirs)
	}
	c.kill(t)
	waitGone(t, c.cp, c.dirs)
}

// The reaper kills its own instance's processes only: a second control plane
// of the same process, from the same binaries, with no reaper, keeps running.
func TestReapOnExitLeavesAnotherInstanceAlone(t *testing.T) {
	testenv.ControlPlane(t)
	c := startReapChild(t, true)
	var mine, other []int
	for _, p := range c.cp {
		if names(p, c.otherDirs) {
			other = append(other, p)
		} else {
			mine = append(mine, p)
		}
	}
	t.Cleanup(func() {
		for _, p := range other {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		for _, d := range c.otherDirs {
			_ = os.RemoveAll(d)
		}
	})
	if len(mine) != 2 || len(other) != 2 {
		t.Fatalf("child reported control-plane PIDs %v, of which %v name the other instance's folders %v; want two of each", c.cp, other, c.otherDirs)
	}
	c.kill(t)
	waitGone(t, mine, c.dirs)
	for _, p := range other {
		if !alive(p) {
			t.Errorf("the other instance's process %d died with the reaper of the first", p)
		}
	}
	for _, d := range c.otherDirs {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("the other instance's folder: %v, want it left", err)
		}
	}
}

// reapChildProc is a test binary running as a reap child.
type reapChildProc struct {
	cmd       *exec.Cmd
	cp        []int    // its kube-apiserver and etcd processes
	dirs      []string // the reaped instance's folders
	otherDirs []string // the second instance's, if any
}

func startReapChild(t *testing.T, other bool) *reapChildProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), reapChildEnv+"=1")
	if other {
		cmd.Env = append(cmd.Env, reapOtherEnv+"=1")
	}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	c := &reapChildProc{cmd: cmd}
	var pids []int
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "error":
			t.Fatalf("child: %s", sc.Text())
		case "pid":
			p, _ := strconv.Atoi(f[1])
			pids = append(pids, p)
		case "dirs":
			c.dirs = f[1:]
		case "other":
			c.otherDirs = f[1:]
		}
		if f[0] == "ready" {
			break
		}
	}
	// Besides the reaper's shell: kube-apiserver and etcd.
	for _, p := range pids {
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", p))
		if strings.HasSuffix(exe, "/kube-apiserver") || strings.HasSuffix(exe, "/etcd") {
			c.cp = append(c.cp, p)
		}
	}
	return c
}

func (c *reapChildProc) kill(t *testing.T) {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = c.cmd.Wait()
}

// names reports whether pid's command line names one of dirs.
func names(pid int, dirs []string) bool {
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	for _, arg := range strings.Split(string(cmdline), "\x00") {
		for _, d := range dirs {
			if strings.Contains(arg+"/", "="+d+"/") {
				return true
			}
		}
	}
	return false
}

// waitGone waits up to 15 s for pids to die and dirs to be removed.
func waitGone(t *testing.T, pids []int, dirs []string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var left []string
		for _, p := range pids {
			if alive(p) {
				left = append(left, "process "+strconv.Itoa(p))
			}
		}
		for _, d := range dirs {
			if _, err := os.Stat(d); err == nil {
				left = append(left, "folder "+d)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, p := range pids {
				_ = syscall.Kill(p, syscall.SIGKILL)
			}
			t.Fatalf("15s after its parent was SIGKILLed, the control plane left %v", left)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
