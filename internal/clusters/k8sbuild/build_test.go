package k8sbuild

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/mod/modfile"

	"github.com/vigilkit/vigil/internal/clusters/kubeversion"
)

const upstreamMod = `module k8s.io/kubernetes

go 1.26.0

require (
	k8s.io/api v0.0.0
	k8s.io/client-go v0.0.0
	github.com/spf13/cobra v1.10.2
)

replace (
	k8s.io/api => ./staging/src/k8s.io/api
	k8s.io/client-go => ./staging/src/k8s.io/client-go
	k8s.io/sample-controller => ./staging/src/k8s.io/sample-controller
	github.com/example/fork => github.com/example/fork v1.2.3
)
`

func TestScratchKubernetesModPinsStagingModules(t *testing.T) {
	out, err := scratchKubernetesMod([]byte(upstreamMod), "v1.37.2", "v0.37.2")
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.Parse("go.mod", out, nil)
	if err != nil {
		t.Fatalf("generated go.mod does not parse: %v\n%s", err, out)
	}
	requires := map[string]string{}
	for _, r := range f.Require {
		requires[r.Mod.Path] = r.Mod.Version
	}
	replaces := map[string]string{}
	for _, r := range f.Replace {
		replaces[r.Old.Path] = r.New.Path + "@" + r.New.Version
	}
	want := map[string]string{"k8s.io/kubernetes": "v1.37.2", "k8s.io/api": "v0.37.2", "k8s.io/client-go": "v0.37.2"}
	for p, v := range want {
		if requires[p] != v {
			t.Errorf("require %s = %q, want %q", p, requires[p], v)
		}
	}
	if len(requires) != len(want) {
		t.Errorf("requires %v: want exactly %v", requires, want)
	}
	if replaces["k8s.io/api"] != "k8s.io/api@v0.37.2" || replaces["k8s.io/client-go"] != "k8s.io/client-go@v0.37.2" {
		t.Errorf("replaces %v: want staging modules pinned to their published versions", replaces)
	}
	if _, ok := replaces["k8s.io/sample-controller"]; ok {
		t.Error("sample-controller is pinned, but the module proxy does not serve it")
	}
	if _, ok := replaces["github.com/example/fork"]; ok {
		t.Error("a non-staging replace was copied; only ./staging replaces are rewritten")
	}
}

func TestScratchKubernetesModWithoutStagingFails(t *testing.T) {
	_, err := scratchKubernetesMod([]byte("module k8s.io/kubernetes\n\ngo 1.26\n"), "v1.37.2", "v0.37.2")
	if err == nil || !strings.Contains(err.Error(), "expected replace directives") {
		t.Fatalf("err = %v, want one saying staging replaces were expected", err)
	}
}

const etcdUpstreamMod = `module go.etcd.io/etcd/server/v3

go 1.23

require (
	go.etcd.io/etcd/api/v3 v3.5.21
	go.etcd.io/etcd/client/v2 v2.305.21
	go.etcd.io/etcd/raft/v3 v3.5.21
)

replace (
	go.etcd.io/etcd/api/v3 => ../api
	go.etcd.io/etcd/client/v2 => ../client/v2
	go.etcd.io/etcd/raft/v3 => ../raft
)

replace go.etcd.io/etcd => ./FORBIDDEN_DEPENDENCY
`

// The etcd server's siblings are pinned to its release, whichever they are
// (3.5 has raft and client/v2 beside api, client and pkg).
func TestScratchEtcdModPinsSiblingModules(t *testing.T) {
	out, err := scratchEtcdMod([]byte(etcdUpstreamMod), "v3.5.21")
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.Parse("go.mod", out, nil)
	if err != nil {
		t.Fatalf("generated go.mod does not parse: %v\n%s", err, out)
	}
	replaces := map[string]string{}
	for _, r := range f.Replace {
		replaces[r.Old.Path] = r.New.Path + "@" + r.New.Version
	}
	want := map[string]string{
		"go.etcd.io/etcd/api/v3":  "go.etcd.io/etcd/api/v3@v3.5.21",
		"go.etcd.io/etcd/raft/v3": "go.etcd.io/etcd/raft/v3@v3.5.21",
		// client/v2's versions are v2.305.x: pinned as the server requires it.
		"go.etcd.io/etcd/client/v2": "go.etcd.io/etcd/client/v2@v2.305.21",
	}
	if len(replaces) != len(want) {
		t.Fatalf("replaces %v, want exactly %v", replaces, want)
	}
	for k, v := range want {
		if replaces[k] != v {
			t.Errorf("replace %s = %q, want %q", k, replaces[k], v)
		}
	}
	if len(f.Require) != 1 || f.Require[0].Mod.Path != "go.etcd.io/etcd/server/v3" || f.Require[0].Mod.Version != "v3.5.21" {
		t.Errorf("requires %v, want only the server at v3.5.21", f.Require)
	}
	if _, err := scratchEtcdMod([]byte("module go.etcd.io/etcd/server/v3\n"), "v3.5.21"); err == nil {
		t.Error("a server go.mod without sibling replaces was accepted")
	}
}

func TestVersionLDFlagsStampBothVersionPackages(t *testing.T) {
	flags := versionLDFlags("v1.37.2")
	for _, want := range []string{
		"-X k8s.io/component-base/version.gitVersion=v1.37.2",
		"-X k8s.io/component-base/version.gitMinor=37",
		"-X k8s.io/client-go/pkg/version.gitVersion=v1.37.2",
		"-X k8s.io/client-go/pkg/version.gitMajor=1",
	} {
		if !strings.Contains(flags, want) {
			t.Errorf("ldflags %q lack %q", flags, want)
		}
	}
}

// fakeBuild writes executables named like the real binaries.
func fakeBuild(builds *atomic.Int32, delay time.Duration) func(context.Context, string, string) error {
	return func(ctx context.Context, _, bin string) error {
		builds.Add(1)
		time.Sleep(delay) // the scenario: a build that takes a while
		for _, b := range Binaries {
			if err := os.WriteFile(filepath.Join(bin, b), []byte("#!/bin/sh\n"), 0o755); err != nil {
				return err
			}
		}
		return nil
	}
}

// Many callers at once: exactly one builds, all get the folder, and the folder
// appears whole.
func TestEnsureBuildsOnceUnderConcurrency(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "k8s-test")
	var builds atomic.Int32
	var wg sync.WaitGroup
	results := make([]string, 4)
	errs := make([]error, 4)
	var progress syncBuffer
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = Ensure(t.Context(), BuildOptions{Dir: dir, Progress: &progress, build: fakeBuild(&builds, 300*time.Millisecond)})
		}()
	}
	wg.Wait()
	for i := range results {
		if errs[i] != nil || results[i] != dir {
			t.Fatalf("caller %d: %q, %v; want %q", i, results[i], errs[i], dir)
		}
	}
	if n := builds.Load(); n != 1 {
		t.Fatalf("built %d times, want once", n)
	}
	if err := Check(dir); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(progress.String(), "another process is building") {
		t.Errorf("progress %q: the waiting callers did not say why they wait", progress.String())
	}
	// Once built, Ensure returns without building.
	if _, err := Ensure(t.Context(), BuildOptions{Dir: dir, build: fakeBuild(&builds, 0)}); err != nil || builds.Load() != 1 {
		t.Fatalf("second Ensure: err %v, builds %d; want no new build", err, builds.Load())
	}
	leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(dir), ".k8s-test.build-*"))
	if len(leftovers) != 0 {
		t.Fatalf("build folders left behind: %v", leftovers)
	}
}

// A failed or incomplete build installs nothing and leaves no temporary folder.
func TestEnsureFailedBuildInstallsNothing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(context.Context, string, string) error
		want  string
	}{
		{"error", func(context.Context, string, string) error { return errors.New("compiler exploded") }, "compiler exploded"},
		{"missing binary", func(_ context.Context, _, bin string) error {
			return os.WriteFile(filepath.Join(bin, "etcd"), []byte("x"), 0o755)
		}, "kube-apiserver, kubectl missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "k8s-test")
			_, err := Ensure(t.Context(), BuildOptions{Dir: dir, build: tc.build})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Fatalf("%s exists after a failed build", dir)
			}
			leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(dir), ".k8s-test.build-*"))
			if len(leftovers) != 0 {
				t.Fatalf("build folders left behind: %v", leftovers)
			}
		})
	}
}

// A caller whose context ends while another holds the lock gives up with the
// reason instead of waiting forever.
func TestEnsureWaitingRespectsContext(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "k8s-test")
	unlock, err := lock(t.Context(), filepath.Join(filepath.Dir(dir), ".k8s-test.lock"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	var builds atomic.Int32
	_, err = Ensure(ctx, BuildOptions{Dir: dir, build: fakeBuild(&builds, 0)})
	if !errors.Is(err, context.DeadlineExceeded) || builds.Load() != 0 {
		t.Fatalf("err = %v, builds %d; want the deadline and no build", err, builds.Load())
	}
}

func TestRootHonoursEnvironment(t *testing.T) {
	want := t.TempDir()
	t.Setenv(EnvDir, want)
	got, err := Dir(kubeversion.Default())
	if err != nil {
		t.Fatal(err)
	}
	if got != filepath.Join(want, "k8s-v1.37.2-etcd-v3.7.3") {
		t.Fatalf("Dir = %q, want it under %s", got, want)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// kwok is cached as the control plane is, in a folder of its own named by
// its version whatever the release, and built once; a build that leaves no
// kwok binary installs nothing.
func TestEnsureKwokCachesAFolderOfItsOwn(t *testing.T) {
	root := t.TempDir()
	t.Setenv(EnvDir, root)
	var builds atomic.Int32
	build := func(_ context.Context, _, bin string) error {
		builds.Add(1)
		return os.WriteFile(filepath.Join(bin, "kwok"), []byte("#!/bin/sh\n"), 0o755)
	}
	for _, r := range []kubeversion.Release{kubeversion.Oldest(), kubeversion.Default()} {
		dir, err := EnsureKwok(t.Context(), BuildOptions{Release: r, build: build})
		if err != nil || dir != filepath.Join(root, "kwok-"+Kwok) {
			t.Fatalf("EnsureKwok for %v = %q, %v; want %s", r, dir, err, filepath.Join(root, "kwok-"+Kwok))
		}
	}
	if n := builds.Load(); n != 1 {
		t.Errorf("kwok built %d times for two releases, want once", n)
	}
	empty := func(context.Context, string, string) error { return nil }
	if _, err := EnsureKwok(t.Context(), BuildOptions{Dir: filepath.Join(root, "kwok-empty"), build: empty}); err == nil || !strings.Contains(err.Error(), "kwok missing") {
		t.Errorf("a build that left no kwok binary: %v, want kwok missing", err)
	}
	if _, err := os.Stat(filepath.Join(root, "kwok-empty")); !os.IsNotExist(err) {
		t.Errorf("the failed build installed its folder: %v", err)
	}
}
