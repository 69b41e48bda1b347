// Package image builds a module project into an OCI image without a daemon:
// the machinery of `vigil image`.
//
// Build compiles the module's main package once per platform (linux/amd64
// and linux/arm64) with CGO_ENABLED=0, -trimpath, -buildvcs=false and
// -ldflags "-s -w -buildid=", and puts each binary into one layer on an empty
// base (go-containerregistry's empty.Image). The layer holds exactly:
//
//	/etc/passwd, /etc/group  root and nonroot (65532), as distroless has them
//	/module                  the module binary, mode 0555, the entrypoint
//
// The image config runs /module as User "65532:65532" (numeric, so that
// runAsNonRoot holds without a lookup), with the OCI labels
// org.opencontainers.image.source, .revision and .version, taken from git
// when the project is in a repository and overridable. There is no shell and
// no CA bundle: a module that calls HTTPS endpoints other than the API server
// (whose CA comes with the ServiceAccount) embeds its roots, for instance
// with golang.org/x/crypto/x509roots/fallback.
//
// The same source and Go toolchain give the same digest: every file in the
// layer has the modification time of the build's epoch, owner root, a fixed
// mode and a fixed order; the config's created time is that epoch too. The
// epoch is SOURCE_DATE_EPOCH when set, else the Unix epoch (1970-01-01).
// The git labels are inputs as well: another commit is another digest.
//
// The platform images go into one OCI image index, whose digest is what
// Build reports and what `<module> manifests --image REF@sha256:...` names.
//
// Each platform image has an SBOM: an SPDX 2.3 JSON document of the Go
// modules linked into that binary, read from its build info
// (debug/buildinfo), attached as an OCI 1.1 referrer. The SBOM is an
// artifact manifest (artifactType application/spdx+json, the empty config
// application/vnd.oci.empty.v1+json, one application/spdx+json layer) whose
// subject is the platform image's manifest; `oras discover`, `regctl
// artifact list` or go-containerregistry's remote.Referrers find it. It is
// not listed in the index, so pulling the image never pulls it.
//
// Output goes to a registry (Push, with the docker config keychain, as
// crane, ko and docker use), to an OCI image layout folder (WriteLayout:
// index.json lists the image index and the SBOM manifests) or to a tarball
// (WriteTarball: that same layout as a tar archive, byte for byte
// reproducible: an OCI archive, as skopeo's oci-archive:, `podman load` and
// `ctr images import` read it).
package image
