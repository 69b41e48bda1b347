package changelog

import (
	"regexp"
	"strings"
)

// File is the changelog's name, at the repository's root.
const File = "CHANGELOG.md"

// Release is one version the changelog names.
type Release struct {
	// Version is its semantic version, as vX.Y.Z.
	Version string
	// When is what its heading says after the version: a date, or
	// "unreleased"; empty when it says nothing.
	When string
}

// Unreleased reports whether the release is yet to come: its heading says
// "unreleased", or nothing after the version.
func (r Release) Unreleased() bool { return r.When == "" || strings.EqualFold(r.When, "unreleased") }

var heading = regexp.MustCompile(`(?m)^## (v\d+\.\d+\.\d+)\b[ \t]*(?:[—-]+[ \t]*(.*))?$`)

// Parse returns the releases the changelog's headings name, in its order:
// newest first.
func Parse(log string) []Release {
	var out []Release
	for _, m := range heading.FindAllStringSubmatch(log, -1) {
		out = append(out, Release{Version: m[1], When: strings.TrimSpace(m[2])})
	}
	return out
}

// Newest is the newest release the changelog names; false when it names
// none.
func Newest(log string) (Release, bool) {
	rs := Parse(log)
	if len(rs) == 0 {
		return Release{}, false
	}
	return rs[0], true
}

// LastReleased is the newest release that is not Unreleased; false when
// nothing is released yet.
func LastReleased(log string) (Release, bool) {
	for _, r := range Parse(log) {
		if !r.Unreleased() {
			return r, true
		}
	}
	return Release{}, false
}
