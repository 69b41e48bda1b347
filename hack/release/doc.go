// Command release cross-builds the vigil CLI for linux and darwin, amd64
// and arm64, into dist/: each binary (vigil-<os>-<arch>), its SPDX SBOM
// (vigil-<os>-<arch>.spdx.json) and SHA256SUMS over them all.
//
// The build is reproducible: CGO off, -trimpath, no VCS stamping, the
// version and commit set with -ldflags, and the SBOM dated at the commit's
// time, so two checkouts of one commit, anywhere, give the same bytes and
// the same sums.
//
//	go run ./hack/release [-version v0.1.0] [-out dist]   # make release
package main
