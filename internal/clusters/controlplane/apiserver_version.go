package controlplane

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// versions caches apiServerMinor's answer per kube-apiserver path: every
// test binary's start asks, and running the binary takes a tenth of a
// second.
var versions sync.Map // path → versionAnswer

type versionAnswer struct {
	minor   int
	version string
	err     error
}

var versionLine = regexp.MustCompile(`^Kubernetes (v1\.(\d+)\.\S+)$`)

// apiServerMinor is the minor version of the kube-apiserver in dir and its
// full version, from `kube-apiserver --version`.
func apiServerMinor(dir string) (int, string, error) {
	bin := filepath.Join(dir, "kube-apiserver")
	if a, ok := versions.Load(bin); ok {
		v := a.(versionAnswer)
		return v.minor, v.version, v.err
	}
	v := readVersion(bin)
	versions.Store(bin, v)
	return v.minor, v.version, v.err
}

func readVersion(bin string) versionAnswer {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return versionAnswer{err: fmt.Errorf("%s --version: %w", bin, err)}
	}
	line := strings.TrimSpace(string(out))
	m := versionLine.FindStringSubmatch(line)
	if m == nil {
		return versionAnswer{err: fmt.Errorf("%s --version printed %q, expected a line like \"Kubernetes v1.37.2\"", bin, line)}
	}
	minor, _ := strconv.Atoi(m[2])
	return versionAnswer{minor: minor, version: m[1]}
}
