// Command api records vigil's public API in api/vigil.txt and guards it.
//
// The public API is every exported name of the packages a module author
// imports (see Public), one line each, with its signature: functions,
// methods, types (an interface with its whole method set on one line,
// since adding a method breaks its implementers; a struct with one line per
// exported field), constants and variables. The file is generated, sorted,
// and checked in, so a change to the API shows as a diff in review.
//
//	go run ./hack/api          # write api/vigil.txt
//	go run ./hack/api -check   # fail when it is not what the code exports (make api-check)
//
// Whether a change is compatible is golang.org/x/exp/apidiff's judgement
// of the packages at the last release's git tag (the newest released
// version in CHANGELOG.md, as internal/shipping/changelog reads it) against
// the working tree's: a field or a function added goes; a name removed, a
// signature changed or a method added to an interface is incompatible.
// Before the first release (no version in CHANGELOG.md is released) any
// change goes. After it, writing an incompatible change is refused unless
// CHANGELOG.md's newest entry is an unreleased version whose minor (or
// major) is above the last released one: the version that will say it
// breaks. A release with no git tag is named, with what to do.
package main
