//go:build unix

package dev

import (
	"os/exec"
	"syscall"
)

// detach puts the module's process in a process group of its own, so that a
// Ctrl-C on the terminal reaches vigil dev alone: it removes the webhook
// configurations before it stops the roles.
func detach(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// terminate asks the process to stop, as the kubelet does.
func terminate(cmd *exec.Cmd) { _ = cmd.Process.Signal(syscall.SIGTERM) }
