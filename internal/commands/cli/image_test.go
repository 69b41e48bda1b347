package cli

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/vigilkit/vigil/vigiltest"
)

func vigilImage(t *testing.T, args ...string) (code int, out, errOut string) {
	t.Helper()
	var o, e vigiltest.Buffer
	code = Execute(context.Background(), append([]string{"image"}, args...), &o, &e)
	return code, o.String(), e.String()
}

// Bad input fails before anything is compiled, saying what was expected.
func TestImageRejectsBadInput(t *testing.T) {
	dir := t.TempDir()
	layoutDir := filepath.Join(dir, "layout")
	phases := filepath.Join(vigilRoot(t), "examples", "phases")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no output", []string{phases}, "no output: expected exactly one of --push REF, --tarball FILE, --oci-layout DIR or --node REF"},
		{"node and tarball", []string{phases, "--node", "vigil.local/x:1", "--tarball", filepath.Join(dir, "x.tar")}, "2 outputs (--node, --tarball): expected exactly one"},
		{"tag with node", []string{phases, "--node", "vigil.local/x:1", "--tag", "vigil.local/x:2"}, "--tag names the image in --tarball and --oci-layout; with --node, REF is the name"},
		{"node to a digest", []string{phases, "--node", "vigil.local/x@sha256:" + strings.Repeat("a", 64)}, "names a digest: expected a repository and tag"},
		{"two outputs", []string{phases, "--push", "example.com/x:1", "--tarball", filepath.Join(dir, "x.tar")}, "2 outputs (--push, --tarball): expected exactly one"},
		{"two paths", []string{phases, phases, "--oci-layout", layoutDir}, "expected at most one PATH"},
		{"missing folder", []string{filepath.Join(dir, "nowhere"), "--oci-layout", layoutDir}, "is not a folder: expected the folder of a module's main package"},
		{"no Go files", []string{dir, "--oci-layout", layoutDir}, "expected a Go main package that calls vigil.Run; go list says"},
		{"not a main package", []string{"testdata/dev/library", "--oci-layout", layoutDir}, "holds package library (github.com/vigilkit/vigil/internal/commands/cli/testdata/dev/library), not a main package"},
		{"not a module", []string{"testdata/image/plainmain", "--oci-layout", layoutDir}, "does not import github.com/vigilkit/vigil: expected a module"},
		{"push to a digest", []string{phases, "--push", "example.com/x@sha256:" + strings.Repeat("a", 64)}, "names a digest: expected a repository and tag"},
		{"platform without arch", []string{phases, "--platform", "linux", "--oci-layout", layoutDir}, `--platform "linux": expected os/arch, as in linux/arm64`},
		{"not linux", []string{phases, "--platform", "windows/amd64", "--oci-layout", layoutDir}, "platform windows/amd64: expected linux/<arch>"},
		{"platform twice", []string{phases, "--platform", "linux/arm64,linux/arm64", "--oci-layout", layoutDir}, "platform linux/arm64 given twice"},
		{"tag with push", []string{phases, "--push", "example.com/x:1", "--tag", "example.com/x:2"}, "--tag names the image in --tarball and --oci-layout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := vigilImage(t, tc.args...)
			if code != 1 || !strings.Contains(errOut, tc.want) {
				t.Errorf("vigil image %s: exit %d, stderr:\n%s\nwant exit 1 and %q", strings.Join(tc.args, " "), code, errOut, tc.want)
			}
			if out != "" {
				t.Errorf("stdout %q, want nothing", out)
			}
		})
	}
}

// `vigil image --push` prints REF@sha256:..., what manifests --image takes,
// and nothing else on stdout; its progress lines go to stderr.
func TestImagePushPrintsTheDigestReference(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.WithReferrersSupport(true), registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	ref := strings.TrimPrefix(srv.URL, "http://") + "/acme/labeler:0.1.0"

	code, out, errOut := vigilImage(t, filepath.Join(vigilRoot(t), "examples", "labeler"), "--push", ref, "--version", "0.1.0")
	if code != 0 {
		t.Fatalf("vigil image --push %s: exit %d\n%s", ref, code, errOut)
	}
	if !regexp.MustCompile(`^` + regexp.QuoteMeta(ref) + `@sha256:[0-9a-f]{64}\n$`).MatchString(out) {
		t.Fatalf("stdout %q, want %s@sha256:<digest> alone on a line", out, ref)
	}
	for _, step := range []string{"compile github.com/vigilkit/vigil/examples/labeler for linux/amd64", "compile github.com/vigilkit/vigil/examples/labeler for linux/arm64", "layer linux/amd64", "sbom linux/arm64", "pushed " + strings.TrimSpace(out)} {
		if !strings.Contains(errOut, "vigil image: "+step) {
			t.Errorf("no progress line with %q in:\n%s", step, errOut)
		}
	}
	d, err := name.NewDigest(strings.TrimSpace(out))
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Head(d)
	if err != nil {
		t.Fatalf("the printed reference is not in the registry: %v", err)
	}
	if desc.Digest.String() != d.DigestStr() {
		t.Errorf("registry has %s for %s", desc.Digest, d)
	}
	tagged, err := remote.Head(d.Context().Tag("0.1.0"))
	if err != nil || tagged.Digest != desc.Digest {
		t.Errorf("tag 0.1.0 points at %v (%v), want %s", tagged, err, desc.Digest)
	}

	// Without --revision the label is the checkout's HEAD; --version wins over git.
	head, err := exec.Command("git", "-C", vigilRoot(t), "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatalf("git rev-parse HEAD in the checkout: %v", err)
	}
	img, err := remote.Image(d, remote.WithPlatform(v1.Platform{OS: "linux", Architecture: "arm64"}))
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Architecture != "arm64" {
		t.Errorf("linux/arm64's image has a config for %s", cf.Architecture)
	}
	labels := cf.Config.Labels
	if got, want := labels["org.opencontainers.image.revision"], strings.TrimSpace(string(head)); got != want {
		t.Errorf("revision label %q, want HEAD %q", got, want)
	}
	if got := labels["org.opencontainers.image.version"]; got != "0.1.0" {
		t.Errorf("version label %q, want --version's 0.1.0", got)
	}
}
