package image_test

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/vigilkit/vigil/internal/shipping/image"
)

// testLog sends the build's progress lines to the test's log.
type testLog struct{ t *testing.T }

func (l testLog) Write(b []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// newRegistry serves the OCI distribution API, referrers included, in
// process, and returns its host.
func newRegistry(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.WithReferrersSupport(true), registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// TestBuildIsReproducibleAndRuns builds examples/phases twice (the same
// digest), pushes it to a registry in process, pulls it back and checks the
// index, each image's config and SBOM, runs the host platform's binary taken
// out of its layer (plan, and manifests with the pushed digest reference),
// and writes the OCI layout and archive.
func TestBuildIsReproducibleAndRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: cross-compiles a module for two platforms twice (minutes on 2 cores)")
	}
	ctx := t.Context()
	epoch := time.Unix(1700000000, 0).UTC()
	opts := image.Options{
		Dir:      "../../../examples/phases",
		Source:   "https://github.com/vigilkit/vigil",
		Revision: "0123456789abcdef0123456789abcdef01234567",
		Version:  "1.2.3",
		Epoch:    epoch,
		Log:      testLog{t},
	}
	first, err := image.Build(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	second, err := image.Build(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if first.Digest != second.Digest {
		t.Fatalf("the same source built twice gave two digests: %s and %s", first.Digest, second.Digest)
	}
	for i := range first.Images {
		a, _ := first.Images[i].SBOM.Digest()
		b, _ := second.Images[i].SBOM.Digest()
		if a != b {
			t.Errorf("SBOM of %s: digests %s and %s from the same source", first.Images[i].Platform, a, b)
		}
	}

	host := newRegistry(t)
	tag, err := image.ParseTag(host + "/acme/phases:1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	ref, err := image.Push(ctx, first, tag, testLog{t})
	if err != nil {
		t.Fatal(err)
	}
	if want := host + "/acme/phases:1.2.3@" + first.Digest.String(); ref != want {
		t.Fatalf("Push returned %q, want %q", ref, want)
	}

	d, err := name.NewDigest(ref)
	if err != nil {
		t.Fatalf("the pushed reference %q does not parse as a digest reference: %v", ref, err)
	}
	idx, err := remote.Index(d, remote.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if im.MediaType != types.OCIImageIndex {
		t.Errorf("index media type %s, want %s", im.MediaType, types.OCIImageIndex)
	}
	var platforms []string
	var hostImage v1.Image
	for _, desc := range im.Manifests {
		if desc.Platform == nil {
			t.Fatalf("index entry %s has no platform", desc.Digest)
		}
		platforms = append(platforms, desc.Platform.String())
		img, err := remote.Image(d.Context().Digest(desc.Digest.String()), remote.WithContext(ctx))
		if err != nil {
			t.Fatal(err)
		}
		checkConfig(t, img, *desc.Platform, opts)
		checkSBOM(t, d.Context().Digest(desc.Digest.String()), opts.Version)
		if desc.Platform.OS == runtime.GOOS && desc.Platform.Architecture == runtime.GOARCH {
			hostImage = img
		}
	}
	slices.Sort(platforms)
	if want := []string{"linux/amd64", "linux/arm64"}; !slices.Equal(platforms, want) {
		t.Errorf("platforms %v, want %v", platforms, want)
	}

	t.Run("the binary from the layer runs", func(t *testing.T) {
		if hostImage == nil {
			t.Skipf("no image for this host (%s/%s) to run", runtime.GOOS, runtime.GOARCH)
		}
		files := layerFiles(t, hostImage)
		if !strings.Contains(string(files["etc/passwd"]), ":65532:65532:") {
			t.Errorf("/etc/passwd has no entry for 65532:\n%s", files["etc/passwd"])
		}
		bin := filepath.Join(t.TempDir(), "module")
		if err := os.WriteFile(bin, files[strings.TrimPrefix(image.BinaryPath, "/")], 0o755); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.CommandContext(ctx, bin, "plan").CombinedOutput(); err != nil {
			t.Fatalf("%s plan: %v\n%s", image.BinaryPath, err, out)
		}
		out, err := exec.CommandContext(ctx, bin, "manifests", "--image", ref).Output()
		if err != nil {
			t.Fatalf("%s manifests --image %s: %v", image.BinaryPath, ref, err)
		}
		if !strings.Contains(string(out), "image: "+ref+"\n") {
			t.Errorf("manifests --image %s: no container runs that image:\n%s", ref, out)
		}
		// The module names no Version: the image's, stamped at build, is
		// the one its objects carry (and its registration compares).
		if !strings.Contains(string(out), "app.kubernetes.io/version: "+opts.Version+"\n") {
			t.Errorf("manifests of an image built with version %s: no object is labelled app.kubernetes.io/version: %s", opts.Version, opts.Version)
		}
	})

	t.Run("oci layout", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "layout")
		if err := image.WriteLayout(first, dir, &tag); err != nil {
			t.Fatal(err)
		}
		checkLayout(t, dir, first.Digest, tag)
		if err := image.WriteLayout(first, dir, nil); err == nil || !strings.Contains(err.Error(), "not empty") {
			t.Errorf("writing into a layout folder that exists: got %v, want an error saying it is not empty", err)
		}
	})

	t.Run("tarball", func(t *testing.T) {
		tmp := t.TempDir()
		a, b := filepath.Join(tmp, "a.tar"), filepath.Join(tmp, "b.tar")
		if err := image.WriteTarball(first, a, &tag); err != nil {
			t.Fatal(err)
		}
		if err := image.WriteTarball(second, b, &tag); err != nil {
			t.Fatal(err)
		}
		da, _ := os.ReadFile(a)
		db, _ := os.ReadFile(b)
		if !bytes.Equal(da, db) {
			t.Errorf("two archives of the same source differ (%d and %d bytes)", len(da), len(db))
		}
		dir := filepath.Join(tmp, "untarred")
		untar(t, da, dir)
		checkLayout(t, dir, first.Digest, tag)
	})
}

func checkConfig(t *testing.T, img v1.Image, p v1.Platform, opts image.Options) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != p.OS || cf.Architecture != p.Architecture {
		t.Errorf("%s: config says %s/%s", p, cf.OS, cf.Architecture)
	}
	if cf.Config.User != "65532:65532" {
		t.Errorf("%s: user %q, want 65532:65532", p, cf.Config.User)
	}
	if !slices.Equal(cf.Config.Entrypoint, []string{"/module"}) {
		t.Errorf("%s: entrypoint %q, want [/module]", p, cf.Config.Entrypoint)
	}
	if !cf.Created.Time.Equal(opts.Epoch) {
		t.Errorf("%s: created %s, want the epoch %s", p, cf.Created.Time, opts.Epoch)
	}
	for k, want := range map[string]string{
		"org.opencontainers.image.source":   opts.Source,
		"org.opencontainers.image.revision": opts.Revision,
		"org.opencontainers.image.version":  opts.Version,
	} {
		if got := cf.Config.Labels[k]; got != want {
			t.Errorf("%s: label %s=%q, want %q", p, k, got, want)
		}
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Errorf("%s: %d layers, want 1", p, len(layers))
	}
}

// checkSBOM finds the SPDX referrer of the image at d and reads it.
func checkSBOM(t *testing.T, d name.Digest, version string) {
	t.Helper()
	refs, err := remote.Referrers(d)
	if err != nil {
		t.Fatalf("referrers of %s: %v", d, err)
	}
	rm, err := refs.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	// The registry in process reports a referrer's config media type as its
	// artifactType (as OCI 1.1's release candidates did); the manifest says.
	var sboms []v1.Image
	for _, desc := range rm.Manifests {
		art, err := remote.Image(d.Context().Digest(desc.Digest.String()))
		if err != nil {
			t.Fatal(err)
		}
		if m, err := art.Manifest(); err == nil && m.ArtifactType == image.SPDXMediaType {
			sboms = append(sboms, art)
		}
	}
	if len(sboms) != 1 {
		t.Fatalf("%s has %d SPDX referrers (of %d), want 1", d, len(sboms), len(rm.Manifests))
	}
	art := sboms[0]
	m, err := art.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject == nil || m.Subject.Digest.String() != d.DigestStr() {
		t.Errorf("SBOM subject %v, want %s", m.Subject, d.DigestStr())
	}
	if len(m.Layers) != 1 || m.Layers[0].MediaType != image.SPDXMediaType {
		t.Fatalf("SBOM layers %+v, want one %s", m.Layers, image.SPDXMediaType)
	}
	l, err := art.LayerByDigest(m.Layers[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := l.Compressed()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	var doc struct {
		SPDXVersion string `json:"spdxVersion"`
		Packages    []struct {
			Name        string `json:"name"`
			VersionInfo string `json:"versionInfo"`
		} `json:"packages"`
	}
	if err := json.NewDecoder(rc).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	if doc.SPDXVersion != "SPDX-2.3" {
		t.Errorf("spdxVersion %q", doc.SPDXVersion)
	}
	versions := map[string]string{}
	for _, p := range doc.Packages {
		versions[p.Name] = p.VersionInfo
	}
	for name, want := range map[string]string{
		"github.com/vigilkit/vigil": version,
		"stdlib":                    runtime.Version(),
	} {
		if got, ok := versions[name]; !ok || got != want {
			t.Errorf("SBOM: package %s at %q (present %v), want %q", name, got, ok, want)
		}
	}
	for _, dep := range []string{"k8s.io/client-go", "sigs.k8s.io/controller-runtime"} {
		if versions[dep] == "" {
			t.Errorf("SBOM: no version of %s among %d packages", dep, len(doc.Packages))
		}
	}
}

// layerFiles reads the regular files of the image's layers.
func layerFiles(t *testing.T, img v1.Image) map[string][]byte {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(time.Unix(1700000000, 0)) {
				t.Errorf("layer entry %s: owner %d:%d, time %s; want root and the epoch", h.Name, h.Uid, h.Gid, h.ModTime)
			}
			if h.Typeflag == tar.TypeReg {
				data, err := io.ReadAll(tr)
				if err != nil {
					t.Fatal(err)
				}
				files[h.Name] = data
			}
		}
		_ = rc.Close()
	}
	return files
}

// checkLayout reads the OCI layout in dir: the named index first, then the
// SBOM artifacts.
func checkLayout(t *testing.T, dir string, want v1.Hash, tag name.Tag) {
	t.Helper()
	ii, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	im, err := ii.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 3 {
		t.Fatalf("index.json lists %d manifests, want the image index and 2 SBOMs", len(im.Manifests))
	}
	top := im.Manifests[0]
	if top.Digest != want || top.MediaType != types.OCIImageIndex {
		t.Errorf("index.json's first entry %s %s, want the image index %s", top.MediaType, top.Digest, want)
	}
	if top.Annotations[image.AnnotationContainerName] != tag.Name() || top.Annotations[image.AnnotationRefName] != tag.TagStr() {
		t.Errorf("index.json's first entry annotations %v, want it named %s", top.Annotations, tag)
	}
	inner, err := ii.ImageIndex(want)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := inner.Digest(); err != nil || got != want {
		t.Errorf("image index in the layout: digest %s (%v), want %s", got, err, want)
	}
	for _, desc := range im.Manifests[1:] {
		if desc.ArtifactType != image.SPDXMediaType {
			t.Errorf("index.json entry %s: artifactType %q, want %s", desc.Digest, desc.ArtifactType, image.SPDXMediaType)
		}
	}
}

func untar(t *testing.T, data []byte, dir string) {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, filepath.FromSlash(h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(path, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
