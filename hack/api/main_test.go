package main

import (
	"strings"
	"testing"
)

// A change that removes or changes a line goes in before the first release,
// and after it only under an unreleased minor version above the last release.
func TestIncompatibleChangesNeedANewMinor(t *testing.T) {
	removed := []string{"pkg github.com/vigilkit/vigil, func Old()"}
	for _, tc := range []struct {
		name, log string
		ok        bool
		want      string
	}{
		{"before the first release", "# Changelog\n\n## v0.1.0 — unreleased\n", true, ""},
		{"released, no new version", "## v0.1.0 — 2026-12-06\n", false, "## v0.2.0 — unreleased"},
		{"a patch above the release", "## v0.1.1 — unreleased\n\n## v0.1.0 — 2026-12-06\n", false, "incompatible with v0.1.0"},
		{"a new minor, unreleased", "## v0.2.0 — unreleased\n\n## v0.1.0 — 2026-12-06\n", true, ""},
		{"a new minor, released", "## v0.2.0 — 2027-01-10\n\n## v0.1.0 — 2026-12-06\n", false, "incompatible with v0.2.0"},
		{"no version at all", "# Changelog\n", false, "names no version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Allowed(removed, tc.log)
			if tc.ok != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("Allowed = %v, want ok %t (%q)", err, tc.ok, tc.want)
			}
		})
	}
	if err := Allowed(nil, "## v0.1.0 — 2026-12-06\n"); err != nil {
		t.Errorf("a compatible change (nothing removed): %v, want it allowed", err)
	}
}

func TestRemovedIsWhatTheNewListingLacks(t *testing.T) {
	old := []string{"a", "b", "c"}
	got := Removed(old, []string{"a", "c", "d"})
	if len(got) != 1 || got[0] != "b" {
		t.Errorf("Removed = %v, want [b]", got)
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
