package node

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// pauseSource is the sandbox's process: it holds the pod's namespaces and
// waits to be stopped, as registry.k8s.io/pause does, without a registry.
const pauseSource = `package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signal.Ignore(syscall.SIGCHLD) // the kernel reaps what the pod leaves
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
}
`

// importPause builds the pause image from pauseSource with the go command
// and imports it into the node's containerd as sandboxImage.
func importPause(ctx context.Context, l layout, goCommand string) error {
	work, err := os.MkdirTemp("", "vigil-pause-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	if err := os.WriteFile(filepath.Join(work, "go.mod"), []byte("module vigil.local/pause\n\ngo 1.22\n"), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(work, "main.go"), []byte(pauseSource), 0o644); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, goCommand, "build", "-trimpath", "-ldflags=-s -w", "-o", "pause", ".")
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build the pause image's binary: %w\n%s", err, out)
	}
	bin, err := os.ReadFile(filepath.Join(work, "pause"))
	if err != nil {
		return err
	}
	return importBinary(ctx, l, bin, "pause", "65535:65535", sandboxImage, work)
}

// importBinary imports into the node's containerd, as ref (REPO:TAG), an
// image of one file: bin at /file, its entrypoint, run as user. work is a
// folder for the archive.
func importBinary(ctx context.Context, l layout, bin []byte, file, user, ref, work string) error {
	var layerTar bytes.Buffer
	tw := tar.NewWriter(&layerTar)
	if err := tw.WriteHeader(&tar.Header{Name: file, Mode: 0o555, Size: int64(len(bin)), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := tw.Write(bin); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layerTar.Bytes())), nil })
	if err != nil {
		return err
	}
	img, err := mutate.Append(empty.Image, mutate.Addendum{Layer: layer})
	if err != nil {
		return err
	}
	img, err = mutate.Config(img, v1.Config{Entrypoint: []string{"/" + file}, User: user})
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		return err
	}
	archive := filepath.Join(work, file+".tar")
	if err := tarball.WriteToFile(archive, tag, img); err != nil {
		return err
	}
	_, err = ctr(ctx, l, "images", "import", archive)
	return err
}

// ImportImage loads an image archive (a docker archive, or an OCI image
// layout as `vigil image --tarball` writes it) into the node's runtime,
// where the kubelet finds it, and names it by digest too: a pod spec's
// REPO:TAG@sha256:D is looked up as REPO@sha256:D, which a registry would
// serve and an import does not name. ref is the image's REPO:TAG, digest
// the index's (or manifest's) digest its manifests name it by; "" for
// none.
func (n *Node) ImportImage(ctx context.Context, archive, ref, digest string) error {
	return importImage(ctx, n.layout, archive, ref, digest)
}

func importImage(ctx context.Context, l layout, archive, ref, digest string) error {
	if _, err := ctr(ctx, l, "images", "import", "--all-platforms", archive); err != nil {
		return err
	}
	if digest == "" {
		return nil
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("image %q: expected REPO:TAG: %w", ref, err)
	}
	byDigest := tag.Context().Name() + "@" + digest
	if _, err := ctr(ctx, l, "images", "tag", "--force", tag.Name(), byDigest); err != nil {
		return fmt.Errorf("name the imported image %s by its digest: %w", tag.Name(), err)
	}
	return nil
}

// ImportImage is Node.ImportImage for the node that runs on this machine,
// found by its folder: `vigil image --node` runs in another process than
// `vigil node up`.
func ImportImage(ctx context.Context, archive, ref, digest string) error {
	l := layout{dir: DefaultDir}
	if _, err := os.Stat(l.containerdSocket()); err != nil {
		return fmt.Errorf("no node runs on this machine (no containerd socket at %s): start one with vigil node up", l.containerdSocket())
	}
	return importImage(ctx, l, archive, ref, digest)
}

// ctr runs containerd's ctr against the node's containerd, in the k8s.io
// namespace the CRI plugin reads.
func ctr(ctx context.Context, l layout, args ...string) (string, error) {
	path := lookPath(filepath.Join(l.bin(), "ctr")) // a built containerd's
	if path == "" {
		path = lookPath("ctr")
	}
	if path == "" {
		return "", fmt.Errorf("ctr (from the containerd package) is not installed")
	}
	cmd := exec.CommandContext(ctx, path, append([]string{"--address", l.containerdSocket(), "--namespace", "k8s.io"}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}
