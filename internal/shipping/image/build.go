package image

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	utilversion "k8s.io/apimachinery/pkg/util/version"
)

// BinaryPath is where the module binary sits in the image: the entrypoint.
const BinaryPath = "/module"

// User is the image's user and group: distroless's nonroot.
const User = "65532:65532"

// The OCI labels Build sets on each image's config.
const (
	LabelSource   = "org.opencontainers.image.source"
	LabelRevision = "org.opencontainers.image.revision"
	LabelVersion  = "org.opencontainers.image.version"
)

// vigilPackage is what a module's main package imports, directly or not.
const vigilPackage = "github.com/vigilkit/vigil"

// DefaultPlatforms are the platforms Build compiles for when none are given.
func DefaultPlatforms() []v1.Platform {
	return []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}}
}

// Options say what to build.
type Options struct {
	// Dir is the module project: the folder of a Go main package that
	// declares a vigil module. "" is the working directory.
	Dir string
	// Platforms to compile for; DefaultPlatforms when empty.
	Platforms []v1.Platform
	// Source, Revision and Version are the OCI labels; each one left empty
	// is taken from git when Dir is in a repository (the origin's URL
	// without credentials, HEAD, `git describe --tags --always`), and
	// omitted otherwise.
	Source, Revision, Version string
	// Epoch is the time of every file in the layer and of the config's
	// created field; when zero, SOURCE_DATE_EPOCH, else the Unix epoch.
	Epoch time.Time
	// Log receives one line per step; nil discards them.
	Log io.Writer
	// Go is the go command; "go" when empty.
	Go string
}

// PlatformImage is one platform's image and what went into it.
type PlatformImage struct {
	Platform v1.Platform
	Image    v1.Image
	Digest   v1.Hash
	// LayerSize is the compressed size of the image's layers, in bytes.
	LayerSize int64
	// SBOM is the SPDX artifact whose subject is Image.
	SBOM v1.Image
}

// Result is a built image index: not yet written anywhere.
type Result struct {
	Index  v1.ImageIndex
	Digest v1.Hash
	Images []PlatformImage
	Labels map[string]string
	// Epoch is the time of every file and of the configs' created field.
	Epoch time.Time
}

// Build compiles the module project for each platform and assembles the
// image index and SBOMs, in memory. Nothing is written but temporary files.
func Build(ctx context.Context, o Options) (*Result, error) {
	o, err := withDefaults(o)
	if err != nil {
		return nil, err
	}
	pkg, err := checkProject(ctx, o)
	if err != nil {
		return nil, err
	}
	labels := gitLabels(ctx, o.Dir)
	for k, v := range map[string]string{LabelSource: o.Source, LabelRevision: o.Revision, LabelVersion: o.Version} {
		if v != "" {
			labels[k] = v
		}
	}

	tmp, err := os.MkdirTemp("", "vigil-image-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(tmp) }()

	res := &Result{Labels: labels, Epoch: o.Epoch}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range o.Platforms {
		pi, err := buildPlatform(ctx, o, pkg, tmp, p, labels)
		if err != nil {
			return nil, err
		}
		res.Images = append(res.Images, pi)
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        pi.Image,
			Descriptor: v1.Descriptor{Platform: &p},
		})
	}
	res.Index = idx
	if res.Digest, err = idx.Digest(); err != nil {
		return nil, fmt.Errorf("image index: %w", err)
	}
	names := make([]string, len(res.Images))
	for i, pi := range res.Images {
		names[i] = pi.Platform.String()
	}
	fmt.Fprintf(o.Log, "index %s: %s\n", res.Digest, strings.Join(names, ", "))
	return res, nil
}

// withDefaults fills in the options Build leaves to defaults, and checks the
// platforms: Linux ones, each once.
func withDefaults(o Options) (Options, error) {
	if o.Dir == "" {
		o.Dir = "."
	}
	if o.Go == "" {
		o.Go = "go"
	}
	if len(o.Platforms) == 0 {
		o.Platforms = DefaultPlatforms()
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Epoch.IsZero() {
		epoch, err := EpochFromEnv()
		if err != nil {
			return o, err
		}
		o.Epoch = epoch
	}
	o.Epoch = o.Epoch.UTC()
	for i, p := range o.Platforms {
		if p.OS != "linux" {
			return o, fmt.Errorf("platform %s: expected linux/<arch>, as in linux/amd64: Kubernetes nodes run Linux containers", p)
		}
		if slices.ContainsFunc(o.Platforms[:i], p.Equals) {
			return o, fmt.Errorf("platform %s given twice: expected each platform once", p)
		}
	}
	return o, nil
}

// buildPlatform compiles package pkg for platform p into tmp and makes its
// image, with the labels, and the image's SBOM.
func buildPlatform(ctx context.Context, o Options, pkg, tmp string, p v1.Platform, labels map[string]string) (PlatformImage, error) {
	started := time.Now()
	fmt.Fprintf(o.Log, "compile %s for %s\n", pkg, p)
	bin := filepath.Join(tmp, "module-"+p.OS+"-"+p.Architecture+p.Variant)
	if err := compile(ctx, o, p, bin, labels[LabelVersion]); err != nil {
		return PlatformImage{}, err
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return PlatformImage{}, err
	}
	layer, err := binaryLayer(data, o.Epoch)
	if err != nil {
		return PlatformImage{}, fmt.Errorf("layer for %s: %w", p, err)
	}
	layerSize, err := layer.Size()
	if err != nil {
		return PlatformImage{}, fmt.Errorf("layer for %s: %w", p, err)
	}
	layerDigest, err := layer.Digest()
	if err != nil {
		return PlatformImage{}, fmt.Errorf("layer for %s: %w", p, err)
	}
	img, err := platformImage(p, layer, labels, o.Epoch)
	if err != nil {
		return PlatformImage{}, fmt.Errorf("image for %s: %w", p, err)
	}
	if img, err = plainDescriptor(img); err != nil {
		return PlatformImage{}, fmt.Errorf("image for %s: %w", p, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return PlatformImage{}, fmt.Errorf("image for %s: %w", p, err)
	}
	fmt.Fprintf(o.Log, "layer %s: %s, %.1f MiB of %.1f MiB binary, image %s (%.1fs)\n",
		p, layerDigest, mib(layerSize), mib(int64(len(data))), digest, time.Since(started).Seconds())
	doc, err := spdxFromBinary(bin, p, o.Epoch, o.Version)
	if err != nil {
		return PlatformImage{}, fmt.Errorf("sbom for %s: %w", p, err)
	}
	sbom, err := sbomArtifact(img, doc, o.Epoch)
	if err != nil {
		return PlatformImage{}, fmt.Errorf("sbom for %s: %w", p, err)
	}
	sbomDigest, err := sbom.Digest()
	if err != nil {
		return PlatformImage{}, err
	}
	fmt.Fprintf(o.Log, "sbom %s: SPDX of %d Go modules, %s (subject %s)\n", p, doc.modules, sbomDigest, digest)
	return PlatformImage{Platform: p, Image: img, Digest: digest, LayerSize: layerSize, SBOM: sbom}, nil
}

// EpochFromEnv is SOURCE_DATE_EPOCH (seconds since 1970) when set, else the
// Unix epoch itself.
func EpochFromEnv() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil || sec < 0 {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: expected seconds since 1970, as `git log -1 --format=%%ct` prints", s)
	}
	return time.Unix(sec, 0).UTC(), nil
}

// ErrNotAModule is returned when Dir is not a module project.
var ErrNotAModule = errors.New("not a module project")

// checkProject returns the import path of Dir's main package, or says why
// Dir is not a module project.
func checkProject(ctx context.Context, o Options) (string, error) {
	info, err := os.Stat(o.Dir)
	if err != nil || !info.IsDir() {
		return "", fmt.Errorf("%w: %s is not a folder: expected the folder of a module's main package (the one that calls vigil.Run), as in `vigil image ./cmd/my-module --push ...`", ErrNotAModule, o.Dir)
	}
	cmd := exec.CommandContext(ctx, o.Go, "list", "-json", ".")
	cmd.Dir = o.Dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+o.Platforms[0].Architecture)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%w: %s: expected a Go main package that calls vigil.Run; go list says: %s", ErrNotAModule, o.Dir, firstLines(stderr.String(), err))
	}
	var pkg struct {
		Name       string
		ImportPath string
		Deps       []string
	}
	if err := json.Unmarshal(stdout.Bytes(), &pkg); err != nil {
		return "", fmt.Errorf("go list -json in %s: %w", o.Dir, err)
	}
	if pkg.Name != "main" {
		return "", fmt.Errorf("%w: %s holds package %s (%s), not a main package: expected the folder of a module's main package, the one that calls vigil.Run", ErrNotAModule, o.Dir, pkg.Name, pkg.ImportPath)
	}
	if !slices.Contains(pkg.Deps, vigilPackage) {
		return "", fmt.Errorf("%w: main package %s in %s does not import %s: expected a module, a program that declares vigil.NewModule and calls vigil.Run", ErrNotAModule, pkg.ImportPath, o.Dir, vigilPackage)
	}
	return pkg.ImportPath, nil
}

// VersionVariable is the variable a build stamps with the image's version,
// when that is a semantic version (1.2.0, v1.2.0-rc.1): a module whose
// Options name no Version takes it, so the image's version is the one its
// registration and rollouts compare.
const VersionVariable = "github.com/vigilkit/vigil/internal/definition/define.imageVersion"

// compile builds the main package in o.Dir for p, reproducibly, stamped
// with version when it is a semantic version.
func compile(ctx context.Context, o Options, p v1.Platform, out, version string) error {
	ldflags := "-s -w -buildid="
	if _, err := utilversion.ParseSemantic(version); err == nil && !strings.ContainsAny(version, " '\"") {
		ldflags += " -X " + VersionVariable + "=" + version
	}
	cmd := exec.CommandContext(ctx, o.Go, "build", "-trimpath", "-buildvcs=false", "-ldflags="+ldflags, "-o", out, ".")
	cmd.Dir = o.Dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture)
	if p.Architecture == "arm" && p.Variant != "" {
		cmd.Env = append(cmd.Env, "GOARM="+strings.TrimPrefix(p.Variant, "v"))
	}
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("compile %s for %s: %w\n%s", o.Dir, p, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// binaryLayer is the image's one layer: /etc/passwd, /etc/group and the
// binary at BinaryPath, every entry with the same time, owner and order.
func binaryLayer(binary []byte, epoch time.Time) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := newTar(&buf, epoch)
	tw.dir("etc/")
	tw.file("etc/group", 0o644, []byte("root:x:0:\nnonroot:x:65532:\n"))
	tw.file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"))
	tw.file(strings.TrimPrefix(BinaryPath, "/"), 0o555, binary)
	if err := tw.close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressionLevel(gzip.DefaultCompression), tarball.WithCompressedCaching)
}

// platformImage puts layer on an empty base and sets the config.
func platformImage(p v1.Platform, layer v1.Layer, labels map[string]string, epoch time.Time) (v1.Image, error) {
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	base, err := mutate.ConfigFile(base, &v1.ConfigFile{
		Architecture: p.Architecture,
		OS:           p.OS,
		Variant:      p.Variant,
		Created:      v1.Time{Time: epoch},
		Config: v1.Config{
			User:       User,
			Entrypoint: []string{BinaryPath},
			WorkingDir: "/",
			Labels:     labels,
		},
		RootFS: v1.RootFS{Type: "layers"},
	})
	if err != nil {
		return nil, err
	}
	return mutate.Append(base, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History: v1.History{
			Created:   v1.Time{Time: epoch},
			CreatedBy: "vigil image",
			Comment:   "the module binary at " + BinaryPath + ", /etc/passwd and /etc/group",
		},
	})
}

// describedImage is an image with the descriptor an index lists it by.
type describedImage struct {
	v1.Image
	desc v1.Descriptor
}

func (d *describedImage) Descriptor() (*v1.Descriptor, error) {
	desc := d.desc
	return &desc, nil
}

// plainDescriptor makes img's index entry the plain one of an image:
// go-containerregistry would give it an artifactType (its config's media
// type), which OCI reserves for artifacts and runtimes need not see.
func plainDescriptor(img v1.Image) (v1.Image, error) {
	desc, err := partial.Descriptor(img)
	if err != nil {
		return nil, err
	}
	return &describedImage{Image: img, desc: v1.Descriptor{MediaType: desc.MediaType, Size: desc.Size, Digest: desc.Digest}}, nil
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// firstLines keeps an error output short enough to read.
func firstLines(s string, err error) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return err.Error()
	}
	lines := strings.Split(s, "\n")
	if len(lines) > 5 {
		lines = append(lines[:5], "...")
	}
	return strings.Join(lines, "\n")
}
