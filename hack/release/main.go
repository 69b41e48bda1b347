package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/vigilkit/vigil/internal/clusters/gobuild"
	"github.com/vigilkit/vigil/internal/shipping/changelog"
	"github.com/vigilkit/vigil/internal/shipping/image"
)

// Targets are the platforms a release ships the CLI for.
var Targets = []v1.Platform{
	{OS: "linux", Architecture: "amd64"},
	{OS: "linux", Architecture: "arm64"},
	{OS: "darwin", Architecture: "amd64"},
	{OS: "darwin", Architecture: "arm64"},
}

const cliPkg = "github.com/vigilkit/vigil/internal/commands/cli"

func main() {
	version := flag.String("version", "", "the release's version (default: the newest in CHANGELOG.md)")
	out := flag.String("out", "dist", "the folder the binaries, SBOMs and SHA256SUMS go to")
	only := flag.String("only", "", "build only these targets, os/arch separated by commas (default: all)")
	flag.Parse()
	if err := run(context.Background(), *version, *out, *only); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, version, out, only string) error {
	if version == "" {
		log, err := os.ReadFile(changelog.File)
		if err != nil {
			return err
		}
		newest, ok := changelog.Newest(string(log))
		if !ok {
			return fmt.Errorf("%s names no version (## vX.Y.Z — date): add the release's, or pass -version", changelog.File)
		}
		version = newest.Version
	}
	commit, err := git(ctx, "rev-parse", "HEAD")
	if err != nil {
		return err
	}
	if dirty, err := git(ctx, "status", "--porcelain"); err == nil && dirty != "" {
		commit += "-dirty"
	}
	secs, err := git(ctx, "log", "-1", "--format=%ct")
	if err != nil {
		return err
	}
	unix, err := strconv.ParseInt(secs, 10, 64)
	if err != nil {
		return fmt.Errorf("the commit's time %q: %w", secs, err)
	}
	epoch := time.Unix(unix, 0).UTC()
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	var files []string
	for _, p := range Targets {
		if only != "" && !strings.Contains(","+only+",", ","+p.OS+"/"+p.Architecture+",") {
			continue
		}
		name := fmt.Sprintf("vigil-%s-%s", p.OS, p.Architecture)
		bin := filepath.Join(out, name)
		fmt.Fprintf(os.Stderr, "release: building %s %s (commit %s)\n", name, version, commit)
		env := append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture, "GOFLAGS=-mod=readonly")
		args := BuildArgs(version, commit, bin)
		if _, err := gobuild.Run(ctx, gobuild.Options{Env: env, Progress: os.Stderr, Prefix: "release: ", Label: name}, args...); err != nil {
			return err
		}
		sbom, err := image.BinarySBOM(bin, name, p, epoch, version)
		if err != nil {
			return fmt.Errorf("the SBOM of %s: %w", name, err)
		}
		if err := os.WriteFile(bin+".spdx.json", sbom, 0o644); err != nil {
			return err
		}
		files = append(files, name, name+".spdx.json")
	}
	sums, err := Sums(out, files)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "SHA256SUMS"), []byte(sums), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "release: %s in %s:\n%s", version, out, sums)
	return nil
}

// BuildArgs is the go command that builds the CLI reproducibly into bin.
func BuildArgs(version, commit, bin string) []string {
	ldflags := fmt.Sprintf("-s -w -X %s.Version=%s -X %s.Commit=%s", cliPkg, version, cliPkg, commit)
	return []string{"go", "build", "-v", "-trimpath", "-buildvcs=false", "-ldflags", ldflags, "-o", bin, "./cmd/vigil"}
}

// Sums is SHA256SUMS over files in dir, sorted by name, as sha256sum -c
// reads it.
func Sums(dir string, files []string) (string, error) {
	sort.Strings(files)
	var b strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return "", err
		}
		sum := sha256.Sum256(data)
		fmt.Fprintf(&b, "%s  %s\n", hex.EncodeToString(sum[:]), f)
	}
	return b.String(), nil
}

func git(ctx context.Context, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "git", args...).Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}
