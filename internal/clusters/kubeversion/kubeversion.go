package kubeversion

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Env names the environment variable that chooses the Kubernetes version of
// the control plane that tests and tools start ("1.34"); the default release
// when unset.
const Env = "VIGIL_KUBERNETES_VERSION"

// EnvPreview, set to 1, lets Parse accept the preview releases (Previews)
// beside the supported ones.
const EnvPreview = "VIGIL_KUBERNETES_PREVIEW"

// Release is one Kubernetes release vigil builds and runs: the patch release
// of k8s.io/kubernetes it builds, and the etcd that release's go.mod pins.
type Release struct {
	Minor      int    // the minor version: 33 for 1.33
	Kubernetes string // a k8s.io/kubernetes module version, like v1.37.2
	Etcd       string // a go.etcd.io/etcd/server/v3 module version, like v3.7.0
	Preview    bool   // a pre-release, accepted only with EnvPreview=1
}

// String is the release's minor version as users write it: "1.34".
func (r Release) String() string { return "1." + strconv.Itoa(r.Minor) }

// Staging is the version of the published staging modules (k8s.io/api,
// k8s.io/client-go, ...) of this release: v1.37.2 → v0.37.2.
func (r Release) Staging() string { return "v0." + strings.TrimPrefix(r.Kubernetes, "v1.") }

// AtLeast reports whether the release is minor or newer.
func (r Release) AtLeast(minor int) bool { return r.Minor >= minor }

// supported are the releases vigil is built and tested against, oldest
// first. Each patch release is the newest the Go module proxy serves; each
// etcd is the one that release's go.mod pins (for 1.37, the newest 3.7
// patch, v3.7.3, over the pinned v3.7.0).
var supported = []Release{
	{Minor: 33, Kubernetes: "v1.33.13", Etcd: "v3.5.21"},
	{Minor: 34, Kubernetes: "v1.34.4", Etcd: "v3.6.4"},
	{Minor: 35, Kubernetes: "v1.35.4", Etcd: "v3.6.5"},
	{Minor: 36, Kubernetes: "v1.36.3", Etcd: "v3.6.8"},
	{Minor: 37, Kubernetes: "v1.37.2", Etcd: "v3.7.3"},
}

// previews are pre-releases that can be built and started to see what the
// next release breaks, but that vigil does not support yet.
var previews = []Release{
	{Minor: 38, Kubernetes: "v1.38.0-beta.0", Etcd: "v3.7.3", Preview: true},
}

// defaultMinor is the release tools use when none is given.
const defaultMinor = 37

// Supported returns the supported releases, oldest first.
func Supported() []Release { return append([]Release(nil), supported...) }

// Default returns the release used when none is chosen: 1.37.
func Default() Release {
	r, _ := lookup(defaultMinor, supported)
	return r
}

// Oldest returns the oldest supported release: the one CEL is compiled for
// when no version is given.
func Oldest() Release { return supported[0] }

// Newest returns the newest supported release.
func Newest() Release { return supported[len(supported)-1] }

// Names lists the supported releases as users write them: "1.33, 1.34, ...".
func Names() string {
	names := make([]string, len(supported))
	for i, r := range supported {
		names[i] = r.String()
	}
	return strings.Join(names, ", ")
}

// Parse reads a version as users write it: "1.34", "v1.34", "1.34.4" or
// "v1.34.4" (a patch, when given, must be the one vigil builds). An empty
// string is the default release. A version outside the supported range is
// refused with the list of supported ones.
func Parse(s string) (Release, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Default(), nil
	}
	minor, patch, ok := split(s)
	if !ok {
		return Release{}, fmt.Errorf("kubernetes version %q: expected 1.MINOR, like 1.34 (supported: %s)", s, Names())
	}
	if r, ok := lookup(minor, supported); ok {
		return r.withPatch(s, patch)
	}
	if r, ok := lookup(minor, previews); ok {
		if os.Getenv(EnvPreview) != "1" {
			return Release{}, fmt.Errorf("kubernetes version %q is a preview (%s), not supported yet (supported: %s); set %s=1 to try it", s, r.Kubernetes, Names(), EnvPreview)
		}
		return r.withPatch(s, patch)
	}
	return Release{}, fmt.Errorf("kubernetes version %q is not supported: vigil supports %s (default %s)", s, Names(), Default())
}

// FromEnv returns the release named by $VIGIL_KUBERNETES_VERSION, or the
// default release when it is unset.
func FromEnv() (Release, error) {
	r, err := Parse(os.Getenv(Env))
	if err != nil {
		return Release{}, fmt.Errorf("%s: %w", Env, err)
	}
	return r, nil
}

func (r Release) withPatch(s, patch string) (Release, error) {
	if patch != "" && "v1."+strconv.Itoa(r.Minor)+"."+patch != r.Kubernetes {
		return Release{}, fmt.Errorf("kubernetes version %q: vigil builds %s of %s; give %s to use it", s, r.Kubernetes, r, r)
	}
	return r, nil
}

func lookup(minor int, in []Release) (Release, bool) {
	for _, r := range in {
		if r.Minor == minor {
			return r, true
		}
	}
	return Release{}, false
}

// split reads [v]1.MINOR[.PATCH].
func split(s string) (minor int, patch string, ok bool) {
	rest, ok := strings.CutPrefix(strings.TrimPrefix(s, "v"), "1.")
	if !ok {
		return 0, "", false
	}
	m, patch, _ := strings.Cut(rest, ".")
	n, err := strconv.Atoi(m)
	if err != nil || n < 0 || strconv.Itoa(n) != m {
		return 0, "", false
	}
	return n, patch, true
}
