package dev

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/vigilkit/vigil/internal/definition/spec"
)

// VigilModule is the Go module a vigil module imports.
const VigilModule = "github.com/vigilkit/vigil"

// ErrNotModule is returned for a path that is not a vigil module's main package.
var ErrNotModule = errors.New("not a vigil module")

// ErrDefinition is returned for a module whose definition has mistakes.
var ErrDefinition = errors.New("the module's definition has mistakes")

// pkgInfo is what `go list` says of the package at a path.
type pkgInfo struct {
	Dir        string
	ImportPath string
	Name       string
	Deps       []string
	Error      *struct{ Err string }
}

// inspect checks that dir holds a Go main package that uses vigil.
func inspect(ctx context.Context, dir string) (*pkgInfo, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrNotModule, dir, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%w: %s is a file: give the folder of the module's main package", ErrNotModule, dir)
	}
	cmd := exec.CommandContext(ctx, "go", "list", "-e", "-json=Dir,ImportPath,Name,Deps,Error", ".")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := output(cmd)
	if err != nil {
		return nil, fmt.Errorf("%w: %s is not a Go package in a Go module: %s", ErrNotModule, dir, firstLines(stderr.String(), 5))
	}
	p := &pkgInfo{}
	if err := json.Unmarshal(out, p); err != nil {
		return nil, fmt.Errorf("read `go list` of %s: %w", dir, err)
	}
	if p.Error != nil {
		return nil, fmt.Errorf("%w: %s: %s", ErrNotModule, dir, p.Error.Err)
	}
	if p.Name != "main" {
		return nil, fmt.Errorf("%w: %s is package %s, not a main package: vigil dev runs a module's binary, whose main calls vigil.Run", ErrNotModule, dir, p.Name)
	}
	if !slices.Contains(p.Deps, VigilModule) {
		return nil, fmt.Errorf("%w: %s (%s) does not import %s: a module's main declares it with vigil.NewModule and runs it with vigil.Run", ErrNotModule, dir, p.ImportPath, VigilModule)
	}
	return p, nil
}

// build compiles the package into bin.
func build(ctx context.Context, dir, bin string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if _, err := output(cmd); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", dir, err, strings.TrimSpace(out.String()))
	}
	return nil
}

// output runs cmd, tied to vigil dev so that it dies with it, and returns
// its standard output when the caller did not take it.
func output(cmd *exec.Cmd) ([]byte, error) {
	var out bytes.Buffer
	if cmd.Stdout == nil {
		cmd.Stdout = &out
	}
	tie(cmd)
	if err := start(cmd); err != nil {
		return nil, err
	}
	err := cmd.Wait()
	return out.Bytes(), err
}

// readPlan runs the binary's plan; a module with definition mistakes fails
// here, and its error names each mistake's call site.
func readPlan(ctx context.Context, bin string) (*spec.Module, error) {
	cmd := exec.CommandContext(ctx, bin, "plan", "-o", "json")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := output(cmd)
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if strings.Contains(msg, "definition mistakes") {
			// The binary prints "vigil: module X has definition mistakes:\n<file:line>: ...".
			return nil, definitionError(strings.TrimPrefix(msg, "vigil: "))
		}
		return nil, fmt.Errorf("%w: `%s plan -o json` failed (%v): %s", ErrNotModule, filepath.Base(bin), err, firstLines(msg, 5))
	}
	p, err := spec.Decode(out)
	if err != nil {
		return nil, fmt.Errorf("%w: `%s plan -o json`: %v", ErrNotModule, filepath.Base(bin), err)
	}
	return p, nil
}

// definitionError is the module's own report of its mistakes.
type definitionError string

func (e definitionError) Error() string { return string(e) }
func (e definitionError) Unwrap() error { return ErrDefinition }

func firstLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = append(lines[:n], "...")
	}
	return strings.Join(lines, "\n")
}
