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
// the instance's folder.
func (i *Instance) ReapOnExit() (stop func(), err error) {
	pids, err := children(os.Getpid(), i.Dir)
	if err != nil {
		return nil, err
	}
	if len(pids) == 0 {
		return nil, fmt.Errorf("reap the control plane: no process of %s runs as a child of this one", i.Dir)
	}
	var lines []string
	for _, p := range pids {
		lines = append(lines, strconv.Itoa(p))
	}
	for _, d := range []string{i.env.ControlPlane.Etcd.DataDir, i.env.ControlPlane.GetAPIServer().CertDir} {
		if d != "" && filepath.IsAbs(d) {
			lines = append(lines, d)
		}
	}
	// Every line is a PID or an absolute folder; at EOF (or anything read
	// after the list), kill the PIDs, then remove the folders once they are
	// gone.
	const script = `pids=; dirs=
while IFS= read -r l; do case $l in /*) dirs="$dirs $l";; *[!0-9]*|'') ;; *) pids="$pids $l";; esac; done
[ -n "$pids" ] && kill -9 $pids 2>/dev/null
sleep 1
[ -n "$dirs" ] && rm -rf $dirs
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

// children lists the PIDs of parent's children whose executable is in dir.
func children(parent int, dir string) ([]int, error) {
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []int
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
		out = append(out, pid)
	}
	return out, nil
}
