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
// A change that removes or changes a line is incompatible. Before the first
// release (the newest version in CHANGELOG.md is "unreleased" and none is
// released) any change goes. After it, writing an incompatible change is
// refused unless CHANGELOG.md's newest entry is an unreleased version whose
// minor (or major) is above the last released one: the version that will
// say it breaks.
package main
