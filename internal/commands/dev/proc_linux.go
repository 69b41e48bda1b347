//go:build linux

package dev

import (
	"os/exec"
	"runtime"
	"syscall"
)

// detach puts the module's process in a process group of its own, so that a
// Ctrl-C on the terminal reaches vigil dev alone: it removes the webhook
// configurations before it stops the roles. The process dies with vigil dev,
// as tie makes it.
func detach(cmd *exec.Cmd) {
	tie(cmd)
	cmd.SysProcAttr.Setpgid = true
}

// tie makes the process die with vigil dev, however vigil dev ends — SIGKILL
// included: the kernel sends it SIGKILL when its parent goes (Pdeathsig).
// Go's fork checks that the parent is still there after setting it, so a
// vigil dev killed during the start leaves nothing either.
func tie(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// starts runs every start on one OS thread that never ends: Pdeathsig fires
// when the thread that forked the process ends, not the process, and the Go
// runtime ends a thread when a goroutine locked to it returns.
var starts = make(chan func())

func init() {
	go func() {
		runtime.LockOSThread()
		for f := range starts {
			f()
		}
	}()
}

// start starts cmd from the thread that never ends.
func start(cmd *exec.Cmd) error {
	done := make(chan error, 1)
	starts <- func() { done <- cmd.Start() }
	return <-done
}
