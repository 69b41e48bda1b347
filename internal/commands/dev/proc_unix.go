//go:build unix && !linux

package dev

import (
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
