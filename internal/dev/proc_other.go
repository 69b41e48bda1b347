//go:build !unix

package dev

import "os/exec"

func detach(*exec.Cmd) {}

func terminate(cmd *exec.Cmd) { _ = cmd.Process.Kill() }
