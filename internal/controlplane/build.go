package controlplane

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
)

// EnvDir names the environment variable that moves the cache root, the folder
// under which each pair of versions gets a folder of its own.
const EnvDir = "VIGIL_CONTROL_PLANE_DIR"

// Versions names a Kubernetes release and the etcd release to run it with.
type Versions struct {
	Kubernetes string // a k8s.io/kubernetes module version, like v1.37.2
	Etcd       string // a go.etcd.io/etcd/server/v3 module version, like v3.7.3
}

// DefaultVersions is the control plane vigil is built and tested against.
var DefaultVersions = Versions{Kubernetes: "v1.37.2", Etcd: "v3.7.3"}

// Key names the cache folder of these versions.
func (v Versions) Key() string { return "k8s-" + v.Kubernetes + "-etcd-" + v.Etcd }

// stagingVersion is the version the published staging modules (k8s.io/api,
// k8s.io/client-go, ...) carry for a Kubernetes release: v1.37.2 → v0.37.2.
func (v Versions) stagingVersion() (string, error) {
	rest, ok := strings.CutPrefix(v.Kubernetes, "v1.")
	if !ok || rest == "" {
		return "", fmt.Errorf("kubernetes version %q: expected the form v1.MINOR.PATCH", v.Kubernetes)
	}
	return "v0." + rest, nil
}

// Binaries are the executables a control-plane folder holds, in the names
// envtest looks them up by.
var Binaries = []string{"etcd", "kube-apiserver", "kubectl"}

// ErrNotBuilt reports a control-plane folder that lacks a binary.
var ErrNotBuilt = errors.New("control-plane binaries not built")

// Root returns the folder under which control planes are cached: $VIGIL_CONTROL_PLANE_DIR
// when set, otherwise vigil/control-plane in the user's cache folder.
func Root() (string, error) {
	if d := os.Getenv(EnvDir); d != "" {
		return filepath.Abs(d)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("find the user cache folder (set %s to choose one): %w", EnvDir, err)
	}
	return filepath.Join(cache, "vigil", "control-plane"), nil
}

// Dir returns the cache folder of the given versions, built or not.
func Dir(v Versions) (string, error) {
	root, err := Root()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, v.Key()), nil
}

// Check reports whether dir holds every control-plane binary, as executables.
// The error wraps ErrNotBuilt and names what is missing.
func Check(dir string) error {
	var missing []string
	for _, b := range Binaries {
		fi, err := os.Stat(filepath.Join(dir, b))
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s missing in %s", ErrNotBuilt, strings.Join(missing, ", "), dir)
	}
	return nil
}

// BuildOptions configures Ensure.
type BuildOptions struct {
	// Versions to build; DefaultVersions when zero.
	Versions Versions
	// Dir is the folder to install into; Dir(Versions) when empty.
	Dir string
	// Progress receives one line per step and a heartbeat while a step runs.
	// Nil discards them.
	Progress io.Writer
	// Heartbeat is the interval of the progress heartbeat; 20s when zero.
	Heartbeat time.Duration
	// GoCommand is the go tool to build with; "go" (from PATH) when empty.
	GoCommand string

	// build replaces the real build in tests of the locking and installing logic.
	build func(ctx context.Context, work, bin string) error
}

func (o *BuildOptions) complete() error {
	if o.Versions == (Versions{}) {
		o.Versions = DefaultVersions
	}
	if o.Dir == "" {
		d, err := Dir(o.Versions)
		if err != nil {
			return err
		}
		o.Dir = d
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = 20 * time.Second
	}
	if o.GoCommand == "" {
		o.GoCommand = "go"
	}
	return nil
}

// Ensure returns the folder holding the control-plane binaries, building them
// first when they are missing. It is safe to call from many processes at once:
// one builds, the others wait for it and then use its result.
func Ensure(ctx context.Context, opts BuildOptions) (string, error) {
	if err := opts.complete(); err != nil {
		return "", err
	}
	if Check(opts.Dir) == nil {
		return opts.Dir, nil
	}
	parent := filepath.Dir(opts.Dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", fmt.Errorf("create control-plane cache folder: %w", err)
	}
	unlock, err := lock(ctx, filepath.Join(parent, "."+filepath.Base(opts.Dir)+".lock"), opts.Progress)
	if err != nil {
		return "", err
	}
	defer unlock()
	// Another process may have finished the build while this one waited.
	if Check(opts.Dir) == nil {
		return opts.Dir, nil
	}

	work, err := os.MkdirTemp(parent, "."+filepath.Base(opts.Dir)+".build-")
	if err != nil {
		return "", fmt.Errorf("create build folder: %w", err)
	}
	defer os.RemoveAll(work)
	bin := filepath.Join(work, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		return "", err
	}

	start := time.Now()
	fmt.Fprintf(opts.Progress, "vigil: building the control plane (kube-apiserver and kubectl %s, etcd %s) into %s\n",
		opts.Versions.Kubernetes, opts.Versions.Etcd, opts.Dir)
	fmt.Fprintf(opts.Progress, "vigil: a cold build takes 6 to 12 minutes on 2 cores; it is cached afterwards\n")
	build := opts.build
	if build == nil {
		b := &builder{opts: opts}
		build = b.build
	}
	if err := build(ctx, work, bin); err != nil {
		return "", fmt.Errorf("build control plane %s: %w", opts.Versions.Key(), err)
	}
	if err := Check(bin); err != nil {
		return "", fmt.Errorf("build control plane %s: %w", opts.Versions.Key(), err)
	}
	// A folder left behind by an older, interrupted layout would block the rename.
	if err := os.RemoveAll(opts.Dir); err != nil {
		return "", fmt.Errorf("clear %s: %w", opts.Dir, err)
	}
	if err := os.Rename(bin, opts.Dir); err != nil {
		return "", fmt.Errorf("install control plane into %s: %w", opts.Dir, err)
	}
	fmt.Fprintf(opts.Progress, "vigil: control plane ready in %s (%s)\n", opts.Dir, time.Since(start).Round(time.Second))
	return opts.Dir, nil
}

// builder compiles the binaries with the go tool.
type builder struct {
	opts BuildOptions
}

func (b *builder) build(ctx context.Context, work, bin string) error {
	v := b.opts.Versions
	staging, err := v.stagingVersion()
	if err != nil {
		return err
	}

	b.step(1, "resolving k8s.io/kubernetes@%s", v.Kubernetes)
	k8sDir := filepath.Join(work, "kubernetes")
	if err := os.Mkdir(k8sDir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(k8sDir, "go.mod"), []byte("module vigil.local/scratch\n\ngo 1.26\n"), 0o644); err != nil {
		return err
	}
	out, err := b.run(ctx, k8sDir, "", "go", "mod", "download", "-json", "k8s.io/kubernetes@"+v.Kubernetes)
	if err != nil {
		return err
	}
	var dl struct{ GoMod, Error string }
	if err := json.Unmarshal(out, &dl); err != nil || dl.GoMod == "" {
		return fmt.Errorf("go mod download k8s.io/kubernetes@%s: no go.mod in its answer (%s %v)", v.Kubernetes, dl.Error, err)
	}
	upstream, err := os.ReadFile(dl.GoMod)
	if err != nil {
		return err
	}
	mod, err := scratchKubernetesMod(upstream, v.Kubernetes, staging)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(k8sDir, "go.mod"), mod, 0o644); err != nil {
		return err
	}

	b.step(2, "building etcd %s (about 1 minute cold)", v.Etcd)
	etcdDir := filepath.Join(work, "etcd")
	if err := os.Mkdir(etcdDir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(etcdDir, "go.mod"), scratchEtcdMod(v.Etcd), 0o644); err != nil {
		return err
	}
	if _, err := b.run(ctx, etcdDir, "etcd", "go", "get", "go.etcd.io/etcd/server/v3@"+v.Etcd); err != nil {
		return err
	}
	if _, err := b.run(ctx, etcdDir, "etcd", "go", "build", "-trimpath", "-v", "-o", filepath.Join(bin, "etcd"), "go.etcd.io/etcd/server/v3"); err != nil {
		return err
	}

	b.step(3, "building kube-apiserver and kubectl %s (5 to 11 minutes cold)", v.Kubernetes)
	cmds := []string{"k8s.io/kubernetes/cmd/kube-apiserver", "k8s.io/kubernetes/cmd/kubectl"}
	get := []string{"go", "get"}
	for _, c := range cmds {
		get = append(get, c+"@"+v.Kubernetes)
	}
	if _, err := b.run(ctx, k8sDir, "kube-apiserver, kubectl", get...); err != nil {
		return err
	}
	build := append([]string{"go", "build", "-trimpath", "-v", "-ldflags", versionLDFlags(v.Kubernetes), "-o", bin + string(filepath.Separator)}, cmds...)
	if _, err := b.run(ctx, k8sDir, "kube-apiserver, kubectl", build...); err != nil {
		return err
	}

	b.step(4, "checking the binaries' versions")
	checks := []struct {
		bin  string
		args []string
		want string
	}{
		{"etcd", []string{"--version"}, "etcd Version: " + strings.TrimPrefix(v.Etcd, "v")},
		{"kube-apiserver", []string{"--version"}, "Kubernetes " + v.Kubernetes},
		{"kubectl", []string{"version", "--client"}, "Client Version: " + v.Kubernetes},
	}
	for _, c := range checks {
		out, err := exec.CommandContext(ctx, filepath.Join(bin, c.bin), c.args...).CombinedOutput()
		if err != nil || !bytes.Contains(out, []byte(c.want)) {
			return fmt.Errorf("%s %s: expected output containing %q, got %q (%v)", c.bin, strings.Join(c.args, " "), c.want, bytes.TrimSpace(out), err)
		}
	}
	return nil
}

func (b *builder) step(n int, format string, args ...any) {
	fmt.Fprintf(b.opts.Progress, "vigil: [%d/4] %s\n", n, fmt.Sprintf(format, args...))
}

// versionLDFlags stamps the release into the binaries, which otherwise report v0.0.0.
func versionLDFlags(version string) string {
	major, minor := "1", ""
	if parts := strings.SplitN(strings.TrimPrefix(version, "v"), ".", 3); len(parts) >= 2 {
		major, minor = parts[0], parts[1]
	}
	var flags []string
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		flags = append(flags,
			"-X", pkg+".gitVersion="+version,
			"-X", pkg+".gitMajor="+major,
			"-X", pkg+".gitMinor="+minor,
			"-X", pkg+".gitTreeState=clean",
		)
	}
	return strings.Join(flags, " ")
}

// unpublished are staging modules that Kubernetes' go.mod replaces but that the
// module proxy does not serve; nothing the control plane builds imports them.
var unpublished = map[string]bool{
	"k8s.io/sample-cli-plugin": true,
	"k8s.io/sample-controller": true,
}

// scratchKubernetesMod turns Kubernetes' own go.mod into the go.mod of a module
// that can build its commands: every staging module that it replaces with a
// local folder is pinned to its published version instead.
func scratchKubernetesMod(upstream []byte, version, staging string) ([]byte, error) {
	up, err := modfile.Parse("k8s.io/kubernetes/go.mod", upstream, nil)
	if err != nil {
		return nil, fmt.Errorf("parse k8s.io/kubernetes@%s go.mod: %w", version, err)
	}
	f := &modfile.File{}
	if err := f.AddModuleStmt("vigil.local/control-plane/kubernetes"); err != nil {
		return nil, err
	}
	if err := f.AddGoStmt("1.26"); err != nil {
		return nil, err
	}
	if err := f.AddRequire("k8s.io/kubernetes", version); err != nil {
		return nil, err
	}
	n := 0
	for _, r := range up.Replace {
		if !strings.HasPrefix(r.New.Path, "./staging/") || unpublished[r.Old.Path] {
			continue
		}
		if err := f.AddRequire(r.Old.Path, staging); err != nil {
			return nil, err
		}
		if err := f.AddReplace(r.Old.Path, "", r.Old.Path, staging); err != nil {
			return nil, err
		}
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("k8s.io/kubernetes@%s go.mod: expected replace directives for ./staging modules, found none", version)
	}
	f.Cleanup()
	return f.Format()
}

// scratchEtcdMod is the go.mod of a module that builds the etcd server, whose own
// go.mod points its sibling modules at local folders.
func scratchEtcdMod(version string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "module vigil.local/control-plane/etcd\n\ngo 1.26\n\nrequire go.etcd.io/etcd/server/v3 %s\n\nreplace (\n", version)
	for _, m := range []string{"api/v3", "client/pkg/v3", "client/v3", "pkg/v3"} {
		fmt.Fprintf(&b, "\tgo.etcd.io/etcd/%s => go.etcd.io/etcd/%s %s\n", m, m, version)
	}
	b.WriteString(")\n")
	return []byte(b.String())
}

// run runs the go tool in dir and returns its stdout. While it runs, what is
// being built (label) and how far it got is reported on the progress writer.
func (b *builder) run(ctx context.Context, dir, label string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, b.opts.GoCommand, args[1:]...)
	cmd.Dir = dir
	// The caller's GOFLAGS stay (-modcacherw, say); ours come last and win.
	cmd.Env = append(os.Environ(),
		strings.TrimSpace("GOFLAGS="+os.Getenv("GOFLAGS")+" -buildvcs=false -mod=mod"),
		"GOWORK=off",
		"CGO_ENABLED=0",
	)
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
	tick := time.NewTicker(b.opts.Heartbeat)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				return nil, fmt.Errorf("%s (in %s): %w\n%s", strings.Join(args, " "), dir, err, stderr.tail())
			}
			return stdout.Bytes(), nil
		case <-tick.C:
			if label != "" {
				fmt.Fprintf(b.opts.Progress, "vigil:       %s: %s, %s elapsed\n", label, stderr.summary(args[1]), time.Since(started).Round(time.Second))
			}
		}
	}
}
