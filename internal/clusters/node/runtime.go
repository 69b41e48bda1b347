package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// The container runtime, in one place. containerd 1.6 (Debian 12's) lacks
// the CRI RuntimeConfig call; kubelet 1.37 falls back to its configured
// cgroup driver, kubelet 1.38 will not (it already counts
// kubelet_cri_losing_support{version="1.38.0"}). A Kubernetes after 1.37
// needs containerd 2.x: github.com/containerd/containerd/v2 built from the
// Go module proxy as the node binaries are (Options.ContainerdDir), in
// place of the package.
var runtimePackages = []struct {
	// pkg is the Debian package; path what it installs that the node runs.
	pkg, path string
	// containerd marks what a built containerd replaces.
	containerd bool
}{
	{"containerd", "containerd", true},
	{"containerd", "ctr", true},
	{"runc", "runc", false},
	{"containernetworking-plugins", cniBinDir + "/bridge", false},
	{"containernetworking-plugins", cniBinDir + "/host-local", false},
	{"containernetworking-plugins", cniBinDir + "/loopback", false},
	{"iptables", "iptables", false},
	{"conntrack", "conntrack", false},
}

// cniBinDir is where Debian's containernetworking-plugins puts the plugins.
const cniBinDir = "/usr/lib/cni"

// ErrCannotRun reports a machine a node cannot run on, as it is: the
// message names the cause and the fix.
var ErrCannotRun = errors.New("a node cannot run here")

// Preflight checks what the node needs of the machine and cannot install:
// Linux, root, and the cgroup controllers the kubelet puts pods in.
func Preflight() error {
	if runtime.GOOS != "linux" {
		return fmt.Errorf("%w: a node needs Linux, this is %s: run vigil node on a Linux machine or VM", ErrCannotRun, runtime.GOOS)
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: vigil node needs root (it makes a bridge, network namespaces, iptables rules and cgroups, and runs containerd): run it as root, for instance sudo -E vigil node up", ErrCannotRun)
	}
	var missing []string
	for _, c := range []string{"cpu", "memory", "pids"} {
		if !cgroupController(c) {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: the kubelet needs the cgroup controllers cpu, memory and pids, and %s is not mounted under /sys/fs/cgroup: mount the cgroup hierarchy (v1 or v2) with them, or run on a machine whose kernel has them", ErrCannotRun, strings.Join(missing, ", "))
	}
	return nil
}

// cgroupController reports whether a cgroup controller is mounted: a v1
// hierarchy of its own, or listed by the v2 root.
func cgroupController(name string) bool {
	if fi, err := os.Stat("/sys/fs/cgroup/" + name); err == nil && fi.IsDir() {
		return true
	}
	data, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers")
	return err == nil && strings.Contains(" "+strings.TrimSpace(string(data))+" ", " "+name+" ")
}

// cgroupV1 reports whether the memory controller is on a v1 hierarchy, as
// the kubelet then needs failCgroupV1: false.
func cgroupV1() bool {
	fi, err := os.Stat("/sys/fs/cgroup/memory")
	return err == nil && fi.IsDir()
}

// missingPackages are the Debian packages of the runtime that are not
// installed, by what they install; without containerd's when the node runs
// a built containerd.
func missingPackages(builtContainerd bool) []string {
	var out []string
	for _, p := range runtimePackages {
		if (builtContainerd && p.containerd) || lookPath(p.path) != "" {
			continue
		}
		if len(out) == 0 || out[len(out)-1] != p.pkg {
			out = append(out, p.pkg)
		}
	}
	return out
}

// lookPath finds a command in PATH and the sbin folders (root's PATH may
// lack them), or an absolute path; "" when there is none.
func lookPath(name string) string {
	if strings.HasPrefix(name, "/") {
		if _, err := os.Stat(name); err == nil {
			return name
		}
		return ""
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/sbin", "/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"} {
		if fi, err := os.Stat(dir + "/" + name); err == nil && fi.Mode().IsRegular() {
			return dir + "/" + name
		}
	}
	return ""
}

// EnsureRuntime installs the runtime's Debian packages that are missing,
// with apt-get, saying what it does on progress; containerd's only when the
// node does not run a built one. It fails, naming the packages, where
// apt-get is not there to install them.
func EnsureRuntime(ctx context.Context, builtContainerd bool, progress io.Writer) error {
	pkgs := missingPackages(builtContainerd)
	if len(pkgs) == 0 {
		return nil
	}
	apt := lookPath("apt-get")
	if apt == "" {
		return fmt.Errorf("%w: the node's runtime needs the packages %s, and there is no apt-get to install them: install them (containerd 1.6 or later, runc, the CNI plugins in %s, iptables, conntrack) and run vigil node again", ErrCannotRun, strings.Join(pkgs, ", "), cniBinDir)
	}
	start := time.Now()
	fmt.Fprintf(progress, "vigil: installing %s with apt-get (about 25 s)\n", strings.Join(pkgs, ", "))
	env := append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	run := func(args ...string) error {
		cmd := exec.CommandContext(ctx, apt, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("apt-get %s: %w\n%s", strings.Join(args, " "), err, lastLines(string(out), 15))
		}
		return nil
	}
	install := append([]string{"install", "-y", "--no-install-recommends", "-q"}, pkgs...)
	if run(install...) != nil {
		// The package lists may be missing or old on a new machine.
		if err := run("update", "-q"); err != nil {
			return err
		}
		if err := run(install...); err != nil {
			return err
		}
	}
	if still := missingPackages(builtContainerd); len(still) > 0 {
		return fmt.Errorf("%w: apt-get installed %s, yet %s still lack what the node runs: install them by hand", ErrCannotRun, strings.Join(pkgs, ", "), strings.Join(still, ", "))
	}
	fmt.Fprintf(progress, "vigil: installed %s (%s)\n", strings.Join(pkgs, ", "), time.Since(start).Round(time.Second))
	return nil
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// linkContainerd links a built containerd's binaries (dir) into the node's
// folder and returns the daemon's path there.
func linkContainerd(l layout, dir string) (string, error) {
	if err := os.MkdirAll(l.bin(), 0o755); err != nil {
		return "", err
	}
	for _, b := range []string{"containerd", "containerd-shim-runc-v2", "ctr"} {
		src := filepath.Join(dir, b)
		if _, err := os.Stat(src); err != nil {
			return "", fmt.Errorf("the built containerd in %s lacks %s: %w (rebuild it: remove the folder and start the node again)", dir, b, err)
		}
		dst := filepath.Join(l.bin(), b)
		_ = os.Remove(dst)
		if err := os.Symlink(src, dst); err != nil {
			return "", err
		}
	}
	return filepath.Join(l.bin(), "containerd"), nil
}
