//go:build unix

package dev

import (
	"errors"
	"os/exec"
	"syscall"
)

// terminate asks the process to stop, as the kubelet does.
func terminate(cmd *exec.Cmd) { _ = cmd.Process.Signal(syscall.SIGTERM) }

// kill kills the process and whatever it started in its process group.
func kill(cmd *exec.Cmd) {
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Process.Kill()
}

// running says whether a process with this pid runs (or is a zombie).
func running(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
