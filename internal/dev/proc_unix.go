//go:build unix && !linux

package dev

import (
	"errors"
	"os/exec"
	"syscall"
)

// detach puts the module's process in a process group of its own, so that a
// Ctrl-C on the terminal reaches vigil dev alone: it removes the webhook
// configurations before it stops the roles. (Only on Linux does the process
// also die with a vigil dev that is killed: other systems have no Pdeathsig.)
func detach(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// tie would make the process die with vigil dev; only Linux can.
func tie(*exec.Cmd) {}

func start(cmd *exec.Cmd) error { return cmd.Start() }

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
