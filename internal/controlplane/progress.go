package controlplane

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
)

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
