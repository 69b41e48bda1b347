package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/spf13/cobra"

	"github.com/vigilkit/vigil/internal/clusters/node"
	"github.com/vigilkit/vigil/internal/shipping/image"
)

func newImageCommand(out, errOut io.Writer) *cobra.Command {
	o := &ImageOptions{Progress: errOut}
	cmd := &cobra.Command{
		Use:   "image [PATH] (--push REF | --tarball FILE | --oci-layout DIR | --node REF)",
		Short: "Build a module project into an OCI image for linux/amd64 and linux/arm64, without a daemon",
		Long: `Build the module project in PATH (default ".", the folder of a Go main package
that calls vigil.Run) into an OCI image index for linux/amd64 and linux/arm64,
without Docker or any daemon.

Each platform's image is one layer on an empty base: the module compiled with
CGO_ENABLED=0 -trimpath at ` + image.BinaryPath + `, its entrypoint, run as user ` + image.User + `,
with /etc/passwd and /etc/group. The OCI labels source, revision and version come
from git (--source, --revision, --version override them); a version that is a
semantic version (1.2.0, v1.2.0-rc.1) is also stamped into the binary, and is
the module's version when its Options name none. Every file time and
the created time are SOURCE_DATE_EPOCH (or 1970): the same source and Go
toolchain give the same digest. Each platform image gets an SBOM (SPDX JSON of
the Go modules in the binary's build info) attached as an OCI 1.1 referrer.

Exactly one output:
  --push REF        push to a registry with the docker config's credentials
                    (docker login, credential helpers), then print REF@sha256:...,
                    which <module> manifests --image takes
  --oci-layout DIR  write an OCI image layout (a new or empty folder), offline
  --tarball FILE    write that layout as a tar archive (an OCI archive, as
                    skopeo's oci-archive:, podman load and ctr images import
                    read it), offline
  --node REF        load it into the runtime of the node vigil node up runs on
                    this machine, named REF and by its digest, then print
                    REF@sha256:..., which <module> manifests --image takes:
                    the kubelet finds it with imagePullPolicy IfNotPresent,
                    no registry involved (only the machine's platform is built
                    unless --platform says otherwise)
The file outputs print the index's digest; --tag names the image in them.
Progress goes to stderr, the reference to stdout.`,
		Example: `  vigil image ./examples/labeler --push ghcr.io/acme/labeler:1.0.0
  labeler manifests --image "$(vigil image --push ghcr.io/acme/labeler:1.0.0)"
  vigil image --tarball labeler.tar --tag ghcr.io/acme/labeler:1.0.0
  labeler manifests --image "$(vigil image ./examples/labeler --node vigil.local/labeler:1.0.0)"`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 1 {
				return fmt.Errorf("expected at most one PATH, the module project's folder; got %d: %s", len(args), strings.Join(args, " "))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				o.Dir = args[0]
			}
			return o.Run(cmd.Context(), out)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Push, "push", "", "push to this repository and tag, as in ghcr.io/acme/my-module:1.0.0")
	f.StringVar(&o.Tarball, "tarball", "", "write an OCI archive (the image layout as a tar) into this file")
	f.StringVar(&o.OCILayout, "oci-layout", "", "write an OCI image layout into this new or empty folder")
	f.StringVar(&o.Node, "node", "", "load into the node of vigil node up as this repository and tag, as in vigil.local/my-module:1.0.0")
	f.StringVar(&o.Tag, "tag", "", "with --tarball or --oci-layout: the image's name, as in ghcr.io/acme/my-module:1.0.0")
	f.StringSliceVar(&o.Platforms, "platform", nil, "platforms to build, as in linux/amd64 (default linux/amd64,linux/arm64)")
	f.StringVar(&o.Source, "source", "", "label org.opencontainers.image.source (default: git remote origin, as https)")
	f.StringVar(&o.Revision, "revision", "", "label org.opencontainers.image.revision (default: git HEAD)")
	f.StringVar(&o.Version, "version", "", "label org.opencontainers.image.version, and the module's version when a semantic version and its Options name none (default: git describe --tags --always)")
	return cmd
}

// ImageOptions are the options of `vigil image`.
type ImageOptions struct {
	Dir                      string
	Push, Tarball, OCILayout string
	// Node is the REF the image is loaded into the local node as.
	Node                      string
	Tag                       string
	Platforms                 []string
	Source, Revision, Version string
	// Progress receives the build's progress lines.
	Progress io.Writer
}

// Run builds the image and writes it to the one output given, then prints
// what names it: REF@sha256:... after a push, the index digest otherwise.
func (o *ImageOptions) Run(ctx context.Context, out io.Writer) error {
	var outputs []string
	for flag, v := range map[string]string{"--push": o.Push, "--tarball": o.Tarball, "--oci-layout": o.OCILayout, "--node": o.Node} {
		if v != "" {
			outputs = append(outputs, flag)
		}
	}
	slices.Sort(outputs)
	switch len(outputs) {
	case 0:
		return errors.New("no output: expected exactly one of --push REF, --tarball FILE, --oci-layout DIR or --node REF, as in `vigil image --push ghcr.io/acme/my-module:1.0.0`")
	case 1:
	default:
		return fmt.Errorf("%d outputs (%s): expected exactly one of --push REF, --tarball FILE, --oci-layout DIR or --node REF; run vigil image once per output", len(outputs), strings.Join(outputs, ", "))
	}
	var pushTo name.Tag
	var tag *name.Tag
	var err error
	for flag, ref := range map[string]string{"--push": o.Push, "--node": o.Node} {
		if ref == "" {
			continue
		}
		if o.Tag != "" {
			return fmt.Errorf("--tag names the image in --tarball and --oci-layout; with %s, REF is the name", flag)
		}
		if pushTo, err = image.ParseTag(ref); err != nil {
			return fmt.Errorf("%s: %w", flag, err)
		}
	}
	if o.Tag != "" {
		t, err := image.ParseTag(o.Tag)
		if err != nil {
			return fmt.Errorf("--tag: %w", err)
		}
		tag = &t
	}
	var platforms []v1.Platform
	for _, s := range o.Platforms {
		p, err := v1.ParsePlatform(s)
		if err != nil || p.OS == "" || p.Architecture == "" {
			return fmt.Errorf("--platform %q: expected os/arch, as in linux/arm64", s)
		}
		platforms = append(platforms, *p)
	}
	if o.Node != "" && len(platforms) == 0 {
		// The node runs this machine's platform only.
		platforms = []v1.Platform{{OS: "linux", Architecture: runtime.GOARCH}}
	}
	progress := o.Progress
	if progress == nil {
		progress = io.Discard
	}
	log := &prefixWriter{w: progress, prefix: "vigil image: "}
	started := time.Now()
	res, err := image.Build(ctx, image.Options{
		Dir: o.Dir, Platforms: platforms, Source: o.Source, Revision: o.Revision, Version: o.Version, Log: log,
	})
	if err != nil {
		return err
	}
	switch {
	case o.Push != "":
		ref, err := image.Push(ctx, res, pushTo, log)
		if err != nil {
			return err
		}
		fmt.Fprintf(log, "done in %.1fs\n", time.Since(started).Seconds())
		_, err = fmt.Fprintln(out, ref)
		return err
	case o.Node != "":
		ref, err := loadIntoNode(ctx, res, pushTo)
		if err != nil {
			return err
		}
		fmt.Fprintf(log, "loaded into the node as %s in %.1fs\n", ref, time.Since(started).Seconds())
		_, err = fmt.Fprintln(out, ref)
		return err
	case o.OCILayout != "":
		if err := image.WriteLayout(res, o.OCILayout, tag); err != nil {
			return err
		}
		fmt.Fprintf(log, "wrote OCI layout %s in %.1fs\n", o.OCILayout, time.Since(started).Seconds())
	default:
		if err := image.WriteTarball(res, o.Tarball, tag); err != nil {
			return err
		}
		fmt.Fprintf(log, "wrote OCI archive %s in %.1fs\n", o.Tarball, time.Since(started).Seconds())
	}
	_, err = fmt.Fprintln(out, res.Digest)
	return err
}

// loadIntoNode writes the image as an OCI archive and imports it into the
// local node's runtime as tag and by digest; it returns REF@sha256:....
func loadIntoNode(ctx context.Context, res *image.Result, tag name.Tag) (string, error) {
	tmp, err := os.MkdirTemp("", "vigil-image-node-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	archive := filepath.Join(tmp, "image.tar")
	if err := image.WriteTarball(res, archive, &tag); err != nil {
		return "", err
	}
	if err := node.ImportImage(ctx, archive, tag.Name(), res.Digest.String()); err != nil {
		return "", fmt.Errorf("--node: %w", err)
	}
	return tag.Name() + "@" + res.Digest.String(), nil
}

// prefixWriter starts every line with prefix.
type prefixWriter struct {
	w       io.Writer
	prefix  string
	midLine bool
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 {
		if !p.midLine {
			if _, err := io.WriteString(p.w, p.prefix); err != nil {
				return 0, err
			}
		}
		line, rest, found := strings.Cut(string(b), "\n")
		if found {
			line += "\n"
		}
		if _, err := io.WriteString(p.w, line); err != nil {
			return 0, err
		}
		p.midLine = !found
		b = []byte(rest)
	}
	return n, nil
}
