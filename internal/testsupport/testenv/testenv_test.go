package testenv

import (
	"strings"
	"testing"
)

func TestLookupShortSkipsWithoutLooking(t *testing.T) {
	t.Setenv("KUBEBUILDER_ASSETS", "/nonexistent")
	t.Setenv("CI", "true")
	dir, skip, err := Lookup(true)
	if dir != "" || err != nil || !strings.Contains(skip, "-short") {
		t.Fatalf("Lookup(short) = %q, %q, %v; want a skip naming -short", dir, skip, err)
	}
}

func TestLookupMissingSkipsOutsideCI(t *testing.T) {
	t.Setenv("KUBEBUILDER_ASSETS", t.TempDir())
	t.Setenv("CI", "")
	dir, skip, err := Lookup(false)
	if dir != "" || err != nil || !strings.Contains(skip, "not found") {
		t.Fatalf("Lookup = %q, %q, %v; want a skip saying the binaries are not found", dir, skip, err)
	}
}

func TestLookupMissingFailsInCI(t *testing.T) {
	t.Setenv("KUBEBUILDER_ASSETS", t.TempDir())
	t.Setenv("CI", "true")
	dir, skip, err := Lookup(false)
	if err == nil || dir != "" || skip != "" {
		t.Fatalf("Lookup under CI = %q, %q, %v; want an error", dir, skip, err)
	}
	if !strings.Contains(err.Error(), "CI") {
		t.Fatalf("error %q does not say CI made it fail", err)
	}
}

func TestCI(t *testing.T) {
	for v, want := range map[string]bool{"": false, "false": false, "0": false, "true": true, "1": true} {
		t.Setenv("CI", v)
		if got := CI(); got != want {
			t.Errorf("CI=%q: CI() = %v, want %v", v, got, want)
		}
	}
}
