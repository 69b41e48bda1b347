package image

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Annotations on the image index's entry in a layout's index.json, naming
// it for the tools that load a layout or archive.
const (
	AnnotationRefName       = "org.opencontainers.image.ref.name"
	AnnotationContainerName = "io.containerd.image.name"
)

// ParseTag parses a --push or --tag reference: a repository with an
// optional tag (latest when none). A digest is refused: the digest is what
// the build computes.
func ParseTag(ref string) (name.Tag, error) {
	if ref == "" {
		return name.Tag{}, errors.New("expected an image reference, as in ghcr.io/acme/my-module:1.0.0")
	}
	if _, err := name.NewDigest(ref); err == nil {
		return name.Tag{}, fmt.Errorf("%q names a digest: expected a repository and tag, as in ghcr.io/acme/my-module:1.0.0; the digest is what the build computes", ref)
	}
	t, err := name.NewTag(ref)
	if err != nil {
		return name.Tag{}, fmt.Errorf("%q: expected an image reference, as in ghcr.io/acme/my-module:1.0.0: %w", ref, err)
	}
	return t, nil
}

// Push writes the index to tag, then each SBOM by digest (its subject
// makes it a referrer of its platform image), with the credentials of the
// docker config keychain unless options say otherwise. It returns
// tag@digest, what `<module> manifests --image` takes.
func Push(ctx context.Context, res *Result, tag name.Tag, log io.Writer, options ...remote.Option) (string, error) {
	if log == nil {
		log = io.Discard
	}
	updates := make(chan v1.Update, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		reportPush(log, tag, updates)
	}()
	opts := append([]remote.Option{
		remote.WithContext(ctx),
		remote.WithAuthFromKeychain(authn.DefaultKeychain),
		remote.WithUserAgent("vigil-image"),
	}, options...)
	err := remote.WriteIndex(tag, res.Index, append(opts, remote.WithProgress(updates))...)
	if err != nil {
		// A write that fails before it starts leaves updates open.
		select {
		case <-done:
		case <-time.After(time.Second):
		}
		return "", fmt.Errorf("push %s: %w", tag, err)
	}
	<-done
	for _, pi := range res.Images {
		d, err := pi.SBOM.Digest()
		if err != nil {
			return "", err
		}
		if err := remote.Write(tag.Context().Digest(d.String()), pi.SBOM, opts...); err != nil {
			return "", fmt.Errorf("push the SBOM of %s to %s: %w", pi.Platform, tag.Context(), err)
		}
		fmt.Fprintf(log, "push sbom %s: %s@%s\n", pi.Platform, tag.Context(), d)
	}
	ref := tag.Name() + "@" + res.Digest.String()
	fmt.Fprintf(log, "pushed %s\n", ref)
	return ref, nil
}

// reportPush prints the upload's progress at most every two seconds, and
// once when it is over.
func reportPush(log io.Writer, tag name.Tag, updates <-chan v1.Update) {
	var last v1.Update
	var printed time.Time
	for u := range updates {
		last = u
		if time.Since(printed) >= 2*time.Second && u.Total > 0 {
			fmt.Fprintf(log, "push %s: %.1f of %.1f MiB\n", tag, mib(u.Complete), mib(u.Total))
			printed = time.Now()
		}
	}
	if last.Error == nil && last.Total > 0 {
		fmt.Fprintf(log, "push %s: %.1f of %.1f MiB\n", tag, mib(last.Complete), mib(last.Total))
	}
}

// WriteLayout writes an OCI image layout into dir, which must be new or
// empty: index.json lists the image index (named tag, when given) and the
// SBOM artifacts.
func WriteLayout(res *Result, dir string, tag *name.Tag) error {
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("--oci-layout %s: %w", dir, err)
	}
	if len(entries) > 0 {
		return fmt.Errorf("--oci-layout %s: the folder is not empty: expected a new or empty folder (remove it, or name another)", dir)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("--oci-layout %s: %w", dir, err)
	}
	var opts []layout.Option
	if tag != nil {
		opts = append(opts, layout.WithAnnotations(map[string]string{
			AnnotationRefName:       tag.TagStr(),
			AnnotationContainerName: tag.Name(),
		}))
	}
	if err := p.AppendIndex(res.Index, opts...); err != nil {
		return fmt.Errorf("--oci-layout %s: %w", dir, err)
	}
	for _, pi := range res.Images {
		if err := p.AppendImage(pi.SBOM); err != nil {
			return fmt.Errorf("--oci-layout %s: the SBOM of %s: %w", dir, pi.Platform, err)
		}
	}
	return nil
}

// WriteTarball writes the OCI image layout WriteLayout writes as a tar
// archive into file: entries in lexical order, every one with the epoch's
// time and owner root, so the same image gives the same bytes.
func WriteTarball(res *Result, file string, tag *name.Tag) (err error) {
	tmp, err := os.MkdirTemp("", "vigil-image-layout-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	if err := WriteLayout(res, tmp, tag); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(file), ".vigil-image-*.tar")
	if err != nil {
		return fmt.Errorf("--tarball %s: %w", file, err)
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	tw := newTar(f, res.Epoch)
	err = filepath.WalkDir(tmp, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == tmp {
			return err
		}
		rel, err := filepath.Rel(tmp, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			tw.dir(rel + "/")
			return nil
		}
		src, err := os.Open(path)
		if err != nil {
			return err
		}
		defer func() { _ = src.Close() }()
		info, err := src.Stat()
		if err != nil {
			return err
		}
		tw.copy(rel, 0o644, info.Size(), src)
		return nil
	})
	if err == nil {
		err = tw.close()
	}
	if err == nil {
		err = f.Close()
	}
	if err == nil {
		err = os.Rename(f.Name(), file)
	}
	if err != nil {
		return fmt.Errorf("--tarball %s: %w", file, err)
	}
	return nil
}

// ExtractBinary writes the module binary of the build's first platform
// image (the one at BinaryPath) to out, executable: the binary that
// renders the manifests naming the image, as the image would run it.
func ExtractBinary(res *Result, out string) error {
	if len(res.Images) == 0 {
		return errors.New("the build holds no image")
	}
	rc := mutate.Extract(res.Images[0].Image)
	defer rc.Close()
	tr := tar.NewReader(rc)
	want := strings.TrimPrefix(BinaryPath, "/")
	for {
		h, err := tr.Next()
		if err != nil {
			return fmt.Errorf("%s in the image: %w", BinaryPath, err)
		}
		if strings.TrimPrefix(h.Name, "./") != want {
			continue
		}
		var b bytes.Buffer
		if _, err := io.Copy(&b, tr); err != nil {
			return err
		}
		return os.WriteFile(out, b.Bytes(), 0o755)
	}
}
