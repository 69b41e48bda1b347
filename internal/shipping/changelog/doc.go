// Package changelog reads CHANGELOG.md's releases: the version each
// "## vX.Y.Z — date" heading names, newest first, and whether it is
// released. make api-check (hack/api) and make release (hack/release) read
// it through here.
package changelog
