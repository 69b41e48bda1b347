package changelog

import (
	"slices"
	"testing"
)

func TestParseReadsEveryHeadingNewestFirst(t *testing.T) {
	log := "# Changelog\n\nIntro.\n\n## v0.3.0\n\n## v0.2.0 — unreleased\n\n- a line\n\n## v0.1.1 - 2026-12-20\n\n### Fixed\n\n## v0.1.0 — 2026-12-06\n\n## not a version\n"
	got := Parse(log)
	want := []Release{{"v0.3.0", ""}, {"v0.2.0", "unreleased"}, {"v0.1.1", "2026-12-20"}, {"v0.1.0", "2026-12-06"}}
	if !slices.Equal(got, want) {
		t.Fatalf("Parse = %v, want %v", got, want)
	}
	var unreleased []bool
	for _, r := range got {
		unreleased = append(unreleased, r.Unreleased())
	}
	if !slices.Equal(unreleased, []bool{true, true, false, false}) {
		t.Errorf("Unreleased of each = %v, want [true true false false]", unreleased)
	}
	if r, ok := Newest(log); !ok || r.Version != "v0.3.0" {
		t.Errorf("Newest = %v %t, want v0.3.0", r, ok)
	}
	if r, ok := LastReleased(log); !ok || r.Version != "v0.1.1" {
		t.Errorf("LastReleased = %v %t, want v0.1.1", r, ok)
	}
	if _, ok := Newest("# Changelog\n"); ok {
		t.Error("Newest of a changelog with no version: found one, want none")
	}
	if _, ok := LastReleased("## v0.1.0 — unreleased\n"); ok {
		t.Error("LastReleased with only an unreleased version: found one, want none")
	}
}
