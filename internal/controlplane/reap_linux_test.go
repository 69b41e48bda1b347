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

	"github.com/vigilkit/vigil/internal/controlplane"
	"github.com/vigilkit/vigil/internal/testenv"
)

// reapChildEnv makes the test binary the parent of a control plane: it
// starts one, arms the reaper and prints the PIDs, then waits to be killed.
const reapChildEnv = "VIGIL_TEST_REAP_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(reapChildEnv) == "1" {
		os.Exit(reapChild())
	}
	os.Exit(m.Run())
}

func reapChild() int {
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
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), reapChildEnv+"=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var pids []int
	var dirs []string
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
			dirs = f[1:]
		}
		if f[0] == "ready" {
			break
		}
	}
	// Two processes besides the reaper's shell: kube-apiserver and etcd.
	var cp []int
	for _, p := range pids {
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", p))
		if strings.HasSuffix(exe, "/kube-apiserver") || strings.HasSuffix(exe, "/etcd") {
			cp = append(cp, p)
		}
	}
	if len(cp) != 2 || len(dirs) != 2 {
		t.Fatalf("child reported control-plane PIDs %v (of %v) and folders %v; want kube-apiserver's and etcd's", cp, pids, dirs)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var left []string
		for _, p := range cp {
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
			for _, p := range cp {
				_ = syscall.Kill(p, syscall.SIGKILL)
			}
			t.Fatalf("15s after its parent was SIGKILLed, the control plane left %v", left)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
