package controlplane_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vigilkit/vigil/internal/clusters/controlplane"
	"github.com/vigilkit/vigil/internal/clusters/kubeversion"
)

// assets is a folder of stand-in control-plane binaries whose
// kube-apiserver prints versionLine for --version.
func assets(t *testing.T, versionLine string) string {
	t.Helper()
	dir := t.TempDir()
	for _, b := range []string{"etcd", "kubectl"} {
		if err := os.WriteFile(filepath.Join(dir, b), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	script := "#!/bin/sh\necho '" + versionLine + "'\n"
	if err := os.WriteFile(filepath.Join(dir, "kube-apiserver"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func release(t *testing.T, s string) kubeversion.Release {
	t.Helper()
	r, err := kubeversion.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// $KUBEBUILDER_ASSETS is used only for the release its kube-apiserver is:
// the serving flags and API versions vigil picks for one release are wrong
// for another, so a folder of another minor is refused with what to set.
func TestFindBinariesRefusesAssetsOfAnotherRelease(t *testing.T) {
	dir := assets(t, "Kubernetes v1.33.13")
	t.Setenv(controlplane.EnvAssets, dir)

	got, err := controlplane.FindBinaries(release(t, "1.33"))
	if err != nil || got != dir {
		t.Fatalf("FindBinaries(1.33) = %q, %v; want %q, nil", got, err, dir)
	}

	_, err = controlplane.FindBinaries(release(t, "1.37"))
	if err == nil {
		t.Fatal("FindBinaries(1.37) with 1.33's binaries: no error")
	}
	for _, want := range []string{dir, "v1.33.13", "expected Kubernetes 1.37", kubeversion.Env + "=1.33", "unset " + controlplane.EnvAssets} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestFindBinariesRefusesAnUnreadableVersion(t *testing.T) {
	dir := assets(t, "not a version")
	t.Setenv(controlplane.EnvAssets, dir)
	_, err := controlplane.FindBinaries(release(t, "1.37"))
	if err == nil || !strings.Contains(err.Error(), `printed "not a version"`) || !strings.Contains(err.Error(), "Kubernetes v1.37.2") {
		t.Fatalf("FindBinaries with a kube-apiserver printing no version: %v", err)
	}
}

// A node runs the machine's containerd through 1.37 and the built 2.x from
// 1.38 unless VIGIL_NODE_CONTAINERD says otherwise; a choice the release
// cannot run, or an unknown one, is refused before anything is built.
func TestEnsureContainerdChoice(t *testing.T) {
	t.Setenv(kubeversion.EnvPreview, "1")
	for _, c := range []struct {
		env, release string
		err          []string
	}{
		{"", "1.37", nil},
		{"package", "1.33", nil},
		{"package", "1.38", []string{"needs containerd 2.x", "set it to built"}},
		{"2", "1.37", []string{`"2"`, "expected package", "or built"}},
	} {
		t.Setenv(controlplane.EnvContainerd, c.env)
		dir, err := controlplane.EnsureContainerd(t.Context(), release(t, c.release), nil)
		if c.err == nil {
			if err != nil || dir != "" {
				t.Errorf("%s=%q on %s: %q, %v; want the package (\"\")", controlplane.EnvContainerd, c.env, c.release, dir, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s=%q on %s: no error", controlplane.EnvContainerd, c.env, c.release)
			continue
		}
		for _, want := range c.err {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s=%q on %s: error %q does not mention %q", controlplane.EnvContainerd, c.env, c.release, err, want)
			}
		}
	}
}
