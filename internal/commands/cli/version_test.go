package cli

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
)

// The version comes from -ldflags when the release set it, else from the
// build information: the module's version and the commit, dirty or not.
func TestVersionReadsTheReleaseThenTheBuild(t *testing.T) {
	info := &debug.BuildInfo{Main: debug.Module{Version: "v0.1.0"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123abc"}, {Key: "vcs.modified", Value: "true"},
	}}
	for _, tc := range []struct {
		name                    string
		setVersion, setCommit   string
		info                    *debug.BuildInfo
		ok                      bool
		wantRelease, wantCommit string
	}{
		{"go install of a tag", "", "", info, true, "v0.1.0", "0123abc-dirty"},
		{"make release", "v0.2.0", "fedcba9", info, true, "v0.2.0", "fedcba9"},
		{"a checkout's go build", "", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, true, "(devel)", "unknown"},
		{"no build information", "", "", nil, false, "(devel)", "unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			Version, Commit = tc.setVersion, tc.setCommit
			t.Cleanup(func() { Version, Commit = "", "" })
			release, commit := version(tc.info, tc.ok)
			if release != tc.wantRelease || commit != tc.wantCommit {
				t.Errorf("version = %q, %q; want %q, %q", release, commit, tc.wantRelease, tc.wantCommit)
			}
		})
	}
}

// `vigil version` prints one line; a binary built with the release's
// -ldflags prints what they set.
func TestVersionCommand(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := Execute(context.Background(), []string{"version"}, &out, &errOut); code != 0 {
		t.Fatalf("vigil version exited %d: %s", code, errOut.String())
	}
	if !regexp.MustCompile(`^vigil \S+ \(commit \S+, go\S+ \w+/\w+\)\n$`).MatchString(out.String()) {
		t.Errorf("vigil version printed %q, want one line: vigil <version> (commit <commit>, <go> <os>/<arch>)", out.String())
	}
	if testing.Short() {
		return
	}
	bin := filepath.Join(t.TempDir(), "vigil")
	const pkg = "github.com/vigilkit/vigil/internal/commands/cli"
	build := exec.Command("go", "build", "-o", bin, "-ldflags", "-X "+pkg+".Version=v9.8.7 -X "+pkg+".Commit=abcdef0", "../../../cmd/vigil")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	got, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(got), "vigil v9.8.7 (commit abcdef0, ") {
		t.Errorf("the released binary printed %q, want vigil v9.8.7 (commit abcdef0, ...)", got)
	}
}
