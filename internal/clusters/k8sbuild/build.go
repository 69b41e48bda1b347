package k8sbuild

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

	"github.com/vigilkit/vigil/internal/clusters/gobuild"
	"github.com/vigilkit/vigil/internal/clusters/kubeversion"
)

// EnvDir names the environment variable that moves the cache root, the folder
// under which each pair of versions gets a folder of its own.
const EnvDir = "VIGIL_CONTROL_PLANE_DIR"

// key names the cache folder of a release's control plane.
func key(r kubeversion.Release) string { return "k8s-" + r.Kubernetes + "-etcd-" + r.Etcd }

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

// Dir returns the cache folder of a release's control plane, built or not.
func Dir(r kubeversion.Release) (string, error) {
	root, err := Root()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, key(r)), nil
}

// NodeBinaries are the executables a node folder holds: a node's agents and
// the two controllers a cluster with nodes needs (without a
// controller-manager no ServiceAccount token is published and the node
// keeps its not-ready taint; without a scheduler no Pod gets a node).
var NodeBinaries = []string{"kubelet", "kube-proxy", "kube-controller-manager", "kube-scheduler"}

// Check reports whether dir holds every control-plane binary, as executables.
// The error wraps ErrNotBuilt and names what is missing.
func Check(dir string) error { return check(dir, Binaries) }

func check(dir string, binaries []string) error {
	var missing []string
	for _, b := range binaries {
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
	// Release to build; kubeversion.Default() when zero.
	Release kubeversion.Release
	// Dir is the folder to install into; Dir(Release) when empty.
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

func (o *BuildOptions) complete(set binarySet) error {
	if o.Release == (kubeversion.Release{}) {
		o.Release = kubeversion.Default()
	}
	if o.Dir == "" {
		root, err := Root()
		if err != nil {
			return err
		}
		o.Dir = filepath.Join(root, set.key(o.Release))
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

// binarySet is what one cache folder holds and how it is built.
type binarySet struct {
	key      func(kubeversion.Release) string
	binaries []string
	// what names the binaries in progress and errors.
	what  func(kubeversion.Release) string
	cold  string
	build func(b *builder, ctx context.Context, work, bin string) error
}

var controlPlaneSet = binarySet{
	key:      key,
	binaries: Binaries,
	what: func(v kubeversion.Release) string {
		return fmt.Sprintf("the control plane (kube-apiserver and kubectl %s, etcd %s)", v.Kubernetes, v.Etcd)
	},
	cold:  "a cold build takes 6 to 12 minutes on 2 cores",
	build: (*builder).build,
}

var nodeSet = binarySet{
	key:      func(v kubeversion.Release) string { return "k8s-" + v.Kubernetes + "-node" },
	binaries: NodeBinaries,
	what: func(v kubeversion.Release) string {
		return fmt.Sprintf("the node (kubelet, kube-proxy, kube-controller-manager and kube-scheduler %s)", v.Kubernetes)
	},
	cold:  "about 2 minutes once the control plane's Go caches are warm, up to 10 on a loaded machine",
	build: (*builder).buildNode,
}

// Ensure returns the folder holding the control-plane binaries, building them
// first when they are missing. It is safe to call from many processes at once:
// one builds, the others wait for it and then use its result.
func Ensure(ctx context.Context, opts BuildOptions) (string, error) {
	return ensure(ctx, opts, controlPlaneSet)
}

// EnsureNode returns the folder holding the node binaries (NodeBinaries) of
// opts.Release.Kubernetes, building them as Ensure builds the control plane:
// from the Go module proxy, under a lock, into a cache folder of their own
// (k8s-<version>-node beside the control plane's).
func EnsureNode(ctx context.Context, opts BuildOptions) (string, error) {
	return ensure(ctx, opts, nodeSet)
}

func ensure(ctx context.Context, opts BuildOptions, set binarySet) (string, error) {
	if err := opts.complete(set); err != nil {
		return "", err
	}
	if check(opts.Dir, set.binaries) == nil {
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
	if check(opts.Dir, set.binaries) == nil {
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
	fmt.Fprintf(opts.Progress, "vigil: building %s into %s\n", set.what(opts.Release), opts.Dir)
	fmt.Fprintf(opts.Progress, "vigil: %s; it is cached afterwards\n", set.cold)
	build := opts.build
	if build == nil {
		b := &builder{opts: opts}
		build = func(ctx context.Context, work, bin string) error { return set.build(b, ctx, work, bin) }
	}
	name := set.key(opts.Release)
	if err := build(ctx, work, bin); err != nil {
		return "", fmt.Errorf("build %s: %w", name, err)
	}
	if err := check(bin, set.binaries); err != nil {
		return "", fmt.Errorf("build %s: %w", name, err)
	}
	// A folder left behind by an older, interrupted layout would block the rename.
	if err := os.RemoveAll(opts.Dir); err != nil {
		return "", fmt.Errorf("clear %s: %w", opts.Dir, err)
	}
	if err := os.Rename(bin, opts.Dir); err != nil {
		return "", fmt.Errorf("install %s into %s: %w", name, opts.Dir, err)
	}
	fmt.Fprintf(opts.Progress, "vigil: %s ready in %s (%s)\n", name, opts.Dir, time.Since(start).Round(time.Second))
	return opts.Dir, nil
}

// builder compiles the binaries with the go tool.
type builder struct {
	opts BuildOptions
}

func (b *builder) build(ctx context.Context, work, bin string) error {
	v := b.opts.Release
	staging := v.Staging()

	b.step(1, 4, "resolving k8s.io/kubernetes@%s", v.Kubernetes)
	k8sDir, err := b.kubernetesModule(ctx, work, staging)
	if err != nil {
		return err
	}

	b.step(2, 4, "building etcd %s (about 1 minute cold)", v.Etcd)
	etcdDir := filepath.Join(work, "etcd")
	if err := os.Mkdir(etcdDir, 0o755); err != nil {
		return err
	}
	if err := b.etcdModule(ctx, etcdDir); err != nil {
		return err
	}
	if _, err := b.run(ctx, etcdDir, "etcd", "go", "get", "go.etcd.io/etcd/server/v3@"+v.Etcd); err != nil {
		return err
	}
	if _, err := b.run(ctx, etcdDir, "etcd", "go", "build", "-trimpath", "-v", "-o", filepath.Join(bin, "etcd"), "go.etcd.io/etcd/server/v3"); err != nil {
		return err
	}

	b.step(3, 4, "building kube-apiserver and kubectl %s (5 to 11 minutes cold)", v.Kubernetes)
	if err := b.kubernetesCommands(ctx, k8sDir, bin, "kube-apiserver, kubectl", "kube-apiserver", "kubectl"); err != nil {
		return err
	}

	b.step(4, 4, "checking the binaries' versions")
	return checkVersions(ctx, bin, []versionCheck{
		{"etcd", []string{"--version"}, "etcd Version: " + strings.TrimPrefix(v.Etcd, "v")},
		{"kube-apiserver", []string{"--version"}, "Kubernetes " + v.Kubernetes},
		{"kubectl", []string{"version", "--client"}, "Client Version: " + v.Kubernetes},
	})
}

// buildNode builds the node binaries: the same scratch module as the
// control plane's kube-apiserver, so a warm build cache makes it quick.
func (b *builder) buildNode(ctx context.Context, work, bin string) error {
	v := b.opts.Release
	staging := v.Staging()
	b.step(1, 3, "resolving k8s.io/kubernetes@%s", v.Kubernetes)
	k8sDir, err := b.kubernetesModule(ctx, work, staging)
	if err != nil {
		return err
	}
	b.step(2, 3, "building kubelet, kube-proxy, kube-controller-manager and kube-scheduler %s", v.Kubernetes)
	if err := b.kubernetesCommands(ctx, k8sDir, bin, "node", NodeBinaries...); err != nil {
		return err
	}
	b.step(3, 3, "checking the binaries' versions")
	var checks []versionCheck
	for _, n := range NodeBinaries {
		checks = append(checks, versionCheck{n, []string{"--version"}, "Kubernetes " + v.Kubernetes})
	}
	return checkVersions(ctx, bin, checks)
}

// kubernetesModule writes, in work/kubernetes, the scratch module that builds
// Kubernetes' commands (see scratchKubernetesMod) and returns its folder.
func (b *builder) kubernetesModule(ctx context.Context, work, staging string) (string, error) {
	v := b.opts.Release
	k8sDir := filepath.Join(work, "kubernetes")
	if err := os.Mkdir(k8sDir, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(k8sDir, "go.mod"), []byte("module vigil.local/scratch\n\ngo 1.26\n"), 0o644); err != nil {
		return "", err
	}
	upstream, err := b.downloadMod(ctx, k8sDir, "k8s.io/kubernetes@"+v.Kubernetes)
	if err != nil {
		return "", err
	}
	mod, err := scratchKubernetesMod(upstream, v.Kubernetes, staging)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(k8sDir, "go.mod"), mod, 0o644); err != nil {
		return "", err
	}
	return k8sDir, nil
}

// kubernetesCommands builds k8s.io/kubernetes/cmd/<name> for each name into
// bin, with the release stamped in.
func (b *builder) kubernetesCommands(ctx context.Context, k8sDir, bin, label string, names ...string) error {
	v := b.opts.Release
	var cmds []string
	get := []string{"go", "get"}
	for _, n := range names {
		cmds = append(cmds, "k8s.io/kubernetes/cmd/"+n)
		get = append(get, "k8s.io/kubernetes/cmd/"+n+"@"+v.Kubernetes)
	}
	if _, err := b.run(ctx, k8sDir, label, get...); err != nil {
		return err
	}
	build := append([]string{"go", "build", "-trimpath", "-v", "-ldflags", versionLDFlags(v.Kubernetes), "-o", bin + string(filepath.Separator)}, cmds...)
	_, err := b.run(ctx, k8sDir, label, build...)
	return err
}

// versionCheck is a binary run with args whose output must contain want.
type versionCheck struct {
	bin  string
	args []string
	want string
}

func checkVersions(ctx context.Context, bin string, checks []versionCheck) error {
	for _, c := range checks {
		out, err := exec.CommandContext(ctx, filepath.Join(bin, c.bin), c.args...).CombinedOutput()
		if err != nil || !bytes.Contains(out, []byte(c.want)) {
			return fmt.Errorf("%s %s: expected output containing %q, got %q (%v)", c.bin, strings.Join(c.args, " "), c.want, bytes.TrimSpace(out), err)
		}
	}
	return nil
}

func (b *builder) step(n, of int, format string, args ...any) {
	fmt.Fprintf(b.opts.Progress, "vigil: [%d/%d] %s\n", n, of, fmt.Sprintf(format, args...))
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

// etcdModule writes, in dir, the scratch module that builds the etcd server
// of the release (see scratchEtcdMod).
func (b *builder) etcdModule(ctx context.Context, dir string) error {
	v := b.opts.Release.Etcd
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module vigil.local/scratch\n\ngo 1.26\n"), 0o644); err != nil {
		return err
	}
	upstream, err := b.downloadMod(ctx, dir, "go.etcd.io/etcd/server/v3@"+v)
	if err != nil {
		return err
	}
	mod, err := scratchEtcdMod(upstream, v)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "go.mod"), mod, 0o644)
}

// downloadMod returns the go.mod of module@version, from the module proxy.
func (b *builder) downloadMod(ctx context.Context, dir, modVersion string) ([]byte, error) {
	out, err := b.run(ctx, dir, "", "go", "mod", "download", "-json", modVersion)
	if err != nil {
		return nil, err
	}
	var dl struct{ GoMod, Error string }
	if err := json.Unmarshal(out, &dl); err != nil || dl.GoMod == "" {
		return nil, fmt.Errorf("go mod download %s: no go.mod in its answer (%s %v)", modVersion, dl.Error, err)
	}
	return os.ReadFile(dl.GoMod)
}

// scratchEtcdMod turns the etcd server's own go.mod, which points its sibling
// modules (api, client, pkg; raft and client/v2 in 3.5) at local folders,
// into the go.mod of a module that builds it: each sibling pinned to the
// same release.
func scratchEtcdMod(upstream []byte, version string) ([]byte, error) {
	up, err := modfile.Parse("go.etcd.io/etcd/server/v3/go.mod", upstream, nil)
	if err != nil {
		return nil, fmt.Errorf("parse go.etcd.io/etcd/server/v3@%s go.mod: %w", version, err)
	}
	f := &modfile.File{}
	if err := f.AddModuleStmt("vigil.local/control-plane/etcd"); err != nil {
		return nil, err
	}
	if err := f.AddGoStmt("1.26"); err != nil {
		return nil, err
	}
	if err := f.AddRequire("go.etcd.io/etcd/server/v3", version); err != nil {
		return nil, err
	}
	// A sibling is pinned to the version the server requires it at: the
	// release itself, but v2.305.21 for client/v2 of 3.5.21.
	required := map[string]string{}
	for _, r := range up.Require {
		required[r.Mod.Path] = r.Mod.Version
	}
	n := 0
	for _, r := range up.Replace {
		if !strings.HasPrefix(r.New.Path, "../") || !strings.HasPrefix(r.Old.Path, "go.etcd.io/etcd/") {
			continue
		}
		pin := required[r.Old.Path]
		if pin == "" {
			pin = version
		}
		if err := f.AddReplace(r.Old.Path, "", r.Old.Path, pin); err != nil {
			return nil, err
		}
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("go.etcd.io/etcd/server/v3@%s go.mod: expected replace directives for its sibling modules (../api, ...), found none", version)
	}
	f.Cleanup()
	return f.Format()
}

// run runs the go tool in dir and returns its stdout. While it runs, what is
// being built (label) and how far it got is reported on the progress writer.
func (b *builder) run(ctx context.Context, dir, label string, args ...string) ([]byte, error) {
	return gobuild.Run(ctx, gobuild.Options{
		Go: b.opts.GoCommand, Dir: dir,
		// The caller's GOFLAGS stay (-modcacherw, say); ours come last and win.
		Env: append(os.Environ(),
			strings.TrimSpace("GOFLAGS="+os.Getenv("GOFLAGS")+" -buildvcs=false -mod=mod"),
			"GOWORK=off",
			"CGO_ENABLED=0",
		),
		Progress: b.opts.Progress, Heartbeat: b.opts.Heartbeat, Prefix: "vigil:       ", Label: label,
	}, args...)
}
