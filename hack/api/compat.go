package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/exp/apidiff"
	"golang.org/x/tools/go/packages"
)

// Incompatible lists the incompatible changes of pkgs, as
// golang.org/x/exp/apidiff judges them, from their API at the git tag (the
// last release, extracted from the repository in repo) to the one in the
// working tree of repo: a name removed, a signature changed, a method added
// to an interface others implement. A package the release did not have is
// compatible; one the tree no longer has is not.
func Incompatible(ctx context.Context, repo, tag string, pkgs []string) ([]string, error) {
	base, err := os.MkdirTemp("", "vigil-api-"+tag+"-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(base)
	archive := exec.CommandContext(ctx, "git", "-C", repo, "archive", "--format=tar", tag)
	extract := exec.CommandContext(ctx, "tar", "-x", "-C", base)
	if extract.Stdin, err = archive.StdoutPipe(); err != nil {
		return nil, err
	}
	var stderr strings.Builder
	archive.Stderr = &stderr
	if err := extract.Start(); err != nil {
		return nil, err
	}
	if err := archive.Run(); err != nil {
		return nil, fmt.Errorf("the API of release %s is read from its git tag, which git archive cannot read (%v: %s): tag the release's commit %s", tag, err, strings.TrimSpace(stderr.String()), tag)
	}
	if err := extract.Wait(); err != nil {
		return nil, fmt.Errorf("extract release %s: %w", tag, err)
	}
	old, err := load(base, pkgs)
	if err != nil {
		return nil, fmt.Errorf("release %s: %w", tag, err)
	}
	now, err := load(repo, pkgs)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, path := range pkgs {
		o, n := old[path], now[path]
		switch {
		case o == nil:
			continue // new since the release
		case n == nil:
			out = append(out, path+": the package is gone")
			continue
		}
		for _, c := range apidiff.Changes(o.Types, n.Types).Changes {
			if !c.Compatible {
				out = append(out, path+": "+c.Message)
			}
		}
	}
	return out, nil
}

// load type-checks pkgs in the module at dir; a package it lacks is left
// out.
func load(dir string, pkgs []string) (map[string]*packages.Package, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	loaded, err := packages.Load(&packages.Config{Mode: packages.NeedName | packages.NeedTypes, Dir: abs}, pkgs...)
	if err != nil {
		return nil, err
	}
	out := map[string]*packages.Package{}
	for _, p := range loaded {
		if len(p.Errors) > 0 {
			if p.Types == nil || p.Types.Scope().Len() == 0 {
				continue // not in this tree
			}
			return nil, fmt.Errorf("load %s: %v", p.PkgPath, p.Errors[0])
		}
		out[p.PkgPath] = p
	}
	return out, nil
}
