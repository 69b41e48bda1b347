package chart_test

import (
	"strings"
	"testing"

	"github.com/vigilkit/vigil/internal/shipping/chart"
)

func TestSplitImage(t *testing.T) {
	digest := "sha256:" + strings.Repeat("0f", 32)
	for _, c := range []struct{ ref, repo, tag, digest string }{
		{"ghcr.io/acme/quota:1.0.0", "ghcr.io/acme/quota", "1.0.0", ""},
		{"localhost:5000/quota", "localhost:5000/quota", "", ""},
		{"localhost:5000/quota:2", "localhost:5000/quota", "2", ""},
		{"ghcr.io/acme/quota@" + digest, "ghcr.io/acme/quota", "", digest},
		{"ghcr.io/acme/quota:1.0.0@" + digest, "ghcr.io/acme/quota", "1.0.0", digest},
	} {
		repo, tag, d, err := chart.SplitImage(c.ref)
		if err != nil || repo != c.repo || tag != c.tag || d != c.digest {
			t.Errorf("%s: %q %q %q %v, want %q %q %q", c.ref, repo, tag, d, err, c.repo, c.tag, c.digest)
		}
	}
	for _, c := range []struct{ ref, want string }{
		{"", "--image: expected the module's container image"},
		{"ghcr.io/acme/quota@latest", "expected a digest of the form sha256:"},
		{":1.0.0", "expected a repository"},
	} {
		if _, _, _, err := chart.SplitImage(c.ref); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one saying %s", c.ref, err, c.want)
		}
	}
}
