package controlplane

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ReapOnExit makes the instance's processes die with this one, however it
// ends: kube-apiserver and etcd run in their own process groups (envtest
// starts them so), so a SIGKILLed parent would leave them running. A small
// reaper, in a process group of its own, holds the read end of a pipe whose
// write end only this process has; when this process goes, the pipe closes,
// and the reaper kills the instance's processes and removes their folders.
// Stop it (the returned func) before a graceful Stop, which stops them
// itself. The processes are this process's children whose executable is in
// the instance's folder and whose command line names its etcd data folder or
// its certificates' folder, so that another instance's are left alone.
func (i *Instance) ReapOnExit() (stop func(), err error) {
	var dirs []string
	for _, d := range []string{i.env.ControlPlane.Etcd.DataDir, i.env.ControlPlane.GetAPIServer().CertDir} {
		if d != "" && filepath.IsAbs(d) && !strings.ContainsAny(d, "\n\r") {
			dirs = append(dirs, d)
		}
	}
	procs, err := children(os.Getpid(), i.Dir, dirs)
	if err != nil {
		return nil, err
	}
	if len(procs) == 0 {
		return nil, fmt.Errorf("reap the control plane: no process of %s with %v on its command line runs as a child of this one", i.Dir, dirs)
	}
	var lines []string
	for _, p := range procs {
		lines = append(lines, strconv.Itoa(p.pid)+" "+p.marker)
	}
	lines = append(lines, dirs...)
	// A line is a PID and the folder its command line names, or a folder.
	// At EOF, kill each PID whose command line still names its folder (a
	// PID the system gave to another process since is left alone), then
	// remove the folders once they are gone.
	const script = `nl='
'
procs=; dirs=
while IFS= read -r l; do case $l in /*) dirs="$dirs$nl$l";; [0-9]*' '/*) procs="$procs$nl$l";; esac; done
printf '%s\n' "$procs" | while IFS=' ' read -r p m; do
	[ -n "$p" ] && tr '\0' '\n' < "/proc/$p/cmdline" 2>/dev/null | sed 's|$|/|' | grep -qF -- "=$m/" && kill -9 "$p" 2>/dev/null
done
sleep 1
printf '%s\n' "$dirs" | while IFS= read -r d; do [ -n "$d" ] && rm -rf -- "$d"; done
exit 0`
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Stdin = r
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = r.Close()
		_ = w.Close()
		return nil, fmt.Errorf("reap the control plane: start /bin/sh: %w", err)
	}
	_ = r.Close()
	// The list, without the EOF: that comes when this process ends. The pipe
	// must not leak into other children: os.Pipe sets close-on-exec.
	if _, err := w.WriteString(strings.Join(lines, "\n") + "\n"); err != nil {
		_ = cmd.Process.Kill()
		_ = w.Close()
		return nil, err
	}
	go func() { _ = cmd.Wait() }()
	return func() {
		_ = cmd.Process.Kill() // before the pipe closes: it must not kill anything now
		_ = w.Close()
	}, nil
}

// proc is a child process of the instance and the instance's folder its
// command line names.
type proc struct {
	pid    int
	marker string
}

// children lists parent's children whose executable is in dir and whose
// command line names one of markers: the instance's own kube-apiserver and
// etcd, not another instance's started from the same binaries.
func children(parent int, dir string, markers []string) ([]proc, error) {
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []proc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		s := string(stat)
		end := strings.LastIndexByte(s, ')')
		if end < 0 {
			continue
		}
		fields := strings.Fields(s[end+1:])
		if len(fields) < 2 || fields[1] != strconv.Itoa(parent) {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil || filepath.Dir(exe) != filepath.Clean(dir) {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if m, ok := names(string(cmdline), markers); ok {
			out = append(out, proc{pid, m})
		}
	}
	return out, nil
}

// names reports which of folders a NUL-separated command line names as a
// flag's value (--data-dir=F) or the start of one (--cert-file=F/...).
func names(cmdline string, folders []string) (string, bool) {
	for _, arg := range strings.Split(cmdline, "\x00") {
		for _, f := range folders {
			if strings.Contains(arg+"/", "="+f+"/") {
				return f, true
			}
		}
	}
	return "", false
}
