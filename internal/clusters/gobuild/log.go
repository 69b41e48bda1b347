package gobuild

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Options say how Run runs the go command and reports on it.
type Options struct {
	// Go is the go command; "go" when empty.
	Go string
	// Dir is where it runs; the current folder when empty.
	Dir string
	// Env is its environment; the process's when nil.
	Env []string
	// Progress receives a heartbeat every Heartbeat while it runs: Prefix,
	// Label, how far it got and the time elapsed. Nothing when nil.
	Progress  io.Writer
	Heartbeat time.Duration
	Prefix    string
	Label     string
}

// Run runs the go command with args (args[0] is "go") and returns its
// stdout; its error carries the command's last lines. Pass -v to a build
// for the heartbeat to count the packages it compiles.
func Run(ctx context.Context, o Options, args ...string) ([]byte, error) {
	if o.Go == "" {
		o.Go = "go"
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = 20 * time.Second
	}
	cmd := exec.CommandContext(ctx, o.Go, args[1:]...)
	cmd.Dir, cmd.Env = o.Dir, o.Env
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	stderr := &progressLog{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("run %s: %w (is Go installed and on PATH?)", strings.Join(args, " "), err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	started := time.Now()
	tick := time.NewTicker(o.Heartbeat)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				where := ""
				if o.Dir != "" {
					where = " (in " + o.Dir + ")"
				}
				return nil, fmt.Errorf("%s%s: %w\n%s", strings.Join(args, " "), where, err, stderr.tail())
			}
			return stdout.Bytes(), nil
		case <-tick.C:
			if o.Progress != nil && o.Label != "" {
				fmt.Fprintf(o.Progress, "%s%s: %s, %s elapsed\n", o.Prefix, o.Label, stderr.summary(args[1]), time.Since(started).Round(time.Second))
			}
		}
	}
}

// progressLog collects a go command's stderr: it counts packages compiled and
// modules downloaded for the heartbeat, and keeps the last lines for errors.
type progressLog struct {
	mu        sync.Mutex
	partial   []byte
	lines     []string
	packages  int
	downloads int
	last      string
}

const keepLines = 40

func (p *progressLog) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.partial = append(p.partial, b...)
	for {
		i := bytes.IndexByte(p.partial, '\n')
		if i < 0 {
			break
		}
		p.line(string(p.partial[:i]))
		p.partial = p.partial[i+1:]
	}
	return len(b), nil
}

func (p *progressLog) line(l string) {
	switch {
	case strings.HasPrefix(l, "go: downloading "):
		p.downloads++
	case strings.HasPrefix(l, "go: "), strings.HasPrefix(l, "#"), strings.ContainsAny(l, " \t"):
	default:
		// `go build -v` prints the import path of each package it compiles.
		p.packages++
		p.last = l
	}
	p.lines = append(p.lines, l)
	if len(p.lines) > keepLines {
		p.lines = p.lines[len(p.lines)-keepLines:]
	}
}

// summary says how far the command got, for the heartbeat.
func (p *progressLog) summary(verb string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if verb == "get" {
		return fmt.Sprintf("resolving modules, %d downloaded", p.downloads)
	}
	if p.packages == 0 {
		return "linking or waiting for cached packages"
	}
	return fmt.Sprintf("%d packages compiled, last %s", p.packages, p.last)
}

func (p *progressLog) tail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(append(p.lines, string(p.partial)), "\n")
}
