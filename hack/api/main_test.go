package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// An incompatible change goes in before the first release, and after it
// only under an unreleased minor version above the last release; a
// compatible one always does.
func TestIncompatibleChangesNeedANewMinor(t *testing.T) {
	var asked []string
	incompatible := func(changes ...string) func(string) ([]string, error) {
		return func(tag string) ([]string, error) { asked = append(asked, tag); return changes, nil }
	}
	removed := incompatible("github.com/vigilkit/vigil: Old: removed")
	for _, tc := range []struct {
		name, log string
		changes   func(string) ([]string, error)
		ok        bool
		want      string
	}{
		{"before the first release", "# Changelog\n\n## v0.1.0 — unreleased\n", removed, true, ""},
		{"released, no new version", "## v0.1.0 — 2026-12-06\n", removed, false, "## v0.2.0 — unreleased"},
		{"a patch above the release", "## v0.1.1 — unreleased\n\n## v0.1.0 — 2026-12-06\n", removed, false, "incompatible with v0.1.0"},
		{"a new minor, unreleased", "## v0.2.0 — unreleased\n\n## v0.1.0 — 2026-12-06\n", removed, true, ""},
		{"a new minor, released", "## v0.2.0 — 2027-01-10\n\n## v0.1.0 — 2026-12-06\n", removed, false, "incompatible with v0.2.0"},
		{"no version at all", "# Changelog\n", removed, false, "names no version"},
		{"compatible, released, no new version", "## v0.1.0 — 2026-12-06\n", incompatible(), true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Allowed(tc.log, tc.changes)
			if tc.ok != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("Allowed = %v, want ok %t (%q)", err, tc.ok, tc.want)
			}
		})
	}
	if !slices.Contains(asked, "v0.1.0") || !slices.Contains(asked, "v0.2.0") {
		t.Errorf("the releases compared against: %v, want the last released one of each changelog (v0.1.0, v0.2.0)", asked)
	}
}

// apidiff judges a change against the release's git tag: a field or a
// function added is compatible, a function removed or a method added to an
// interface is not, and a release with no tag is named.
func TestIncompatibleIsApidiffsAgainstTheReleaseTag(t *testing.T) {
	repo := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", repo, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	write := func(src string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(repo, "p"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(repo, "go.mod"), []byte("module example.com/m\n\ngo 1.24\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(repo, "p", "p.go"), []byte("package p\n\n"+src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pkgs := []string{"example.com/m/p"}
	git("init", "-q")
	write("type S struct{ A int }\n\ntype I interface{ M() }\n\nfunc Old() {}\n")
	git("add", "-A")
	git("commit", "-qm", "v0.1.0")
	git("tag", "v0.1.0")

	write("type S struct{ A, B int }\n\ntype I interface{ M() }\n\nfunc Old() {}\n\nfunc New() {}\n")
	if got, err := Incompatible(t.Context(), repo, "v0.1.0", pkgs); err != nil || len(got) != 0 {
		t.Errorf("a field and a function added: Incompatible = %q, %v; want none", got, err)
	}
	write("type S struct{ A int }\n\ntype I interface{ M(); N() }\n")
	got, err := Incompatible(t.Context(), repo, "v0.1.0", pkgs)
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(got, "\n")
	if len(got) != 2 || !strings.Contains(all, "Old") || !strings.Contains(all, "I") {
		t.Errorf("Old removed and a method added to I: Incompatible = %q; want both, each named", got)
	}
	if _, err := Incompatible(t.Context(), repo, "v0.9.0", pkgs); err == nil || !strings.Contains(err.Error(), "tag the release's commit v0.9.0") {
		t.Errorf("a release with no tag: %v; want an error that says to tag it", err)
	}
}

// The listing names functions with their signatures, each struct field,
// methods on their receivers, and an interface's whole method set on one
// line, and leaves out what is unexported.
func TestTheListingOfThePublicAPI(t *testing.T) {
	lines, err := Listing([]string{"github.com/vigilkit/vigil", "github.com/vigilkit/vigil/store"})
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(lines, "\n")
	for _, want := range []string{
		"pkg github.com/vigilkit/vigil, func When[T client.Object](c *Capability, proto T) *AdmissionBuilder[T]",
		"pkg github.com/vigilkit/vigil, method (*AdmissionBuilder[T]) IsCreated() *AdmissionBuilder[T]",
		"pkg github.com/vigilkit/vigil, const ModeEnforce EnforcementMode = \"Enforce\"",
		"pkg github.com/vigilkit/vigil, type Schedule interface{Next(t time.Time) time.Time}",
		"pkg github.com/vigilkit/vigil/store, ",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("the listing has no line %q", want)
		}
	}
	for _, l := range lines {
		if strings.Contains(l, "admissionOptions") || strings.Contains(l, ") outcome(") {
			t.Errorf("the listing names an unexported name: %s", l)
		}
	}
}
