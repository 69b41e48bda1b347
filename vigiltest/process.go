package vigiltest

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vigilkit/vigil/internal/clusters/gobuild"
)

// Process is a command a test runs as the kubelet runs a container — a module
// binary in one of its roles, say: its output kept, its exit awaited. It is
// killed when the test ends, and its output logged if the test failed.
//
// For a module on a node (ModuleOptions.OnNode) a Process stands for a
// container the kubelet runs: Cmd is nil, Output is the container's log read
// through the API, and it exits when the container first terminates.
type Process struct {
	Cmd *exec.Cmd
	// Output holds its stdout and stderr, interleaved.
	Output *Buffer

	exited chan struct{}
	err    error
	// container names the pod's container the process runs, for Pod.
	container string
	// desc names a container a node runs, and code is its exit code.
	desc string
	code int
}

// StartProcess starts name with args, its environment the test's plus env
// ("KEY=value" each; a later one wins). A Pod's containers get exactly their
// container's environment instead: see Env.NewPod.
func StartProcess(t testing.TB, env []string, name string, args ...string) *Process {
	t.Helper()
	return startProcess(t, append(os.Environ(), env...), name, args...)
}

// startProcess starts name with args and exactly the environment env, as a
// container gets it.
func startProcess(t testing.TB, env []string, name string, args ...string) *Process {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = env
	p := &Process{Cmd: cmd, Output: &Buffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.Output, p.Output
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.exited
		if t.Failed() {
			t.Logf("output of %s:\n%s", p, p.Output)
		}
	})
	return p
}

func (p *Process) String() string {
	if p.Cmd == nil {
		return p.desc
	}
	return strings.Join(p.Cmd.Args, " ")
}

// Pid is the process's ID; 0 for a container a node runs.
func (p *Process) Pid() int {
	if p.Cmd == nil {
		return 0
	}
	return p.Cmd.Process.Pid
}

// Exited is closed once the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// ExitCode is the exit code of a process that has exited; -1 when a signal
// ended it.
func (p *Process) ExitCode() int {
	<-p.exited
	if p.Cmd == nil {
		return p.code
	}
	var ee *exec.ExitError
	if p.err != nil && !errors.As(p.err, &ee) {
		return -1
	}
	return p.Cmd.ProcessState.ExitCode()
}

// Wait returns the exit code, or fails the test when the process is still
// running after d.
func (p *Process) Wait(t testing.TB, d time.Duration) int {
	t.Helper()
	select {
	case <-p.exited:
		return p.ExitCode()
	case <-time.After(d):
		t.Fatalf("%s still running after %s:\n%s", p, d, p.Output)
		return -1
	}
}

// Running fails the test when the process exits within d.
func (p *Process) Running(t testing.TB, d time.Duration) {
	t.Helper()
	select {
	case <-p.exited:
		t.Fatalf("%s exited early (%d):\n%s", p, p.ExitCode(), p.Output)
	case <-time.After(d):
	}
}

// WaitOutput waits until the output holds want, and fails the test when it
// does not within d or the process exits first.
func (p *Process) WaitOutput(t testing.TB, want string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !strings.Contains(p.Output.String(), want) {
		select {
		case <-p.exited:
			if strings.Contains(p.Output.String(), want) {
				return
			}
			t.Fatalf("%s exited (%d) without printing %q:\n%s", p, p.ExitCode(), want, p.Output)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not print %q within %s:\n%s", p, want, d, p.Output)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop sends SIGTERM, as the kubelet does, and returns the exit code; the
// test fails when the process has not exited within d.
func (p *Process) Stop(t testing.TB, d time.Duration) int {
	t.Helper()
	if p.Cmd == nil {
		t.Fatalf("%s: the kubelet runs it; stop its pod with Pod.Stop", p)
	}
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	return p.Wait(t, d)
}

// BuildModule builds the main package in dir (as `go build` takes it, such as
// "./examples/labeler" or ".") into the test's temporary folder, without
// symbol tables, and returns the binary's path. It compiles with go build's
// own flags, so the packages `go build` and `go test` (without -race)
// compiled before are reused from Go's build cache; while it builds, it
// says every 10 seconds on stderr how far it got, since a module's first
// build compiles client-go and the rest once.
func BuildModule(t testing.TB, dir string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(filepath.Clean(dir)))
	if filepath.Base(filepath.Clean(dir)) == "." {
		bin = filepath.Join(t.TempDir(), "module")
	}
	_, err := gobuild.Run(context.Background(), gobuild.Options{
		Progress: os.Stderr, Heartbeat: 10 * time.Second, Prefix: "vigiltest: ",
		Label: "go build " + dir + " (a module's first build compiles its dependencies; Go's build cache keeps them)",
	}, "go", "build", "-v", "-ldflags=-s -w", "-o", bin, dir)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// FreeAddr returns a loopback address no one listens on, for a server the
// test starts. It never returns an address twice in a process: the kernel
// may hand a port just closed to the next caller, and two servers a test
// starts (a module's webhook and its metrics, say) would then collide.
func FreeAddr(t testing.TB) string {
	t.Helper()
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		if _, taken := handedOut.LoadOrStore(addr, true); !taken {
			return addr
		}
	}
	t.Fatal("FreeAddr: the kernel kept handing out addresses already handed out")
	return ""
}

// handedOut are the addresses FreeAddr returned.
var handedOut sync.Map

// Memory reads a figure of the running process's /proc status, in KiB:
// "VmRSS" (resident now) or "VmHWM" (the most it has been resident); 0 when
// it cannot be read (the process has exited, or this is not Linux).
func (p *Process) Memory(field string) int64 {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(p.Pid()) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// WaitOK waits for the process to exit 0 within d, and fails the test
// otherwise, with its output.
func (p *Process) WaitOK(t testing.TB, d time.Duration) {
	t.Helper()
	if code := p.Wait(t, d); code != 0 {
		t.Fatalf("%s exited %d:\n%s", p, code, p.Output)
	}
}
