package celversion

import (
	"errors"
	"strings"
	"testing"

	"github.com/vigilkit/vigil/internal/clusters/kubeversion"
)

// Each library the supported releases differ by is refused by the release
// before it, with the release and library it needs, and compiled by that
// release.
func TestExpressionsNeedTheReleaseOfTheirLibrary(t *testing.T) {
	for _, tc := range []struct {
		expr    string
		minor   int
		library string
	}{
		{`isSemver("1.2.3")`, 34, "semver"},
		{`[3, 1, 2].sortBy(x, x)[0] == 1`, 35, "lists extension"},
		{`{"a": 1}.all(k, v, v > 0)`, 33, "two-variable"},
		{`[1, 2].includes(1)`, 38, "Kubernetes' lists library"},
	} {
		r := release(t, tc.minor)
		if _, err := CompilePolicy(tc.expr, r); err != nil {
			t.Errorf("%s on %s: %v, want it compiled", tc.expr, r, err)
		}
		if tc.minor <= kubeversion.Oldest().Minor {
			continue
		}
		// The release before refuses it and names the one that accepts it.
		before := release(t, tc.minor-1)
		_, err := CompilePolicy(tc.expr, before)
		if needs := (*NeedsError)(nil); !errors.As(err, &needs) || needs.Minor != tc.minor {
			t.Errorf("%s on %s: %v, want it to need 1.%d", tc.expr, before, err, tc.minor)
		}
		_, err = CompilePolicy(tc.expr, kubeversion.Oldest())
		var needs *NeedsError
		if !errors.As(err, &needs) || needs.Minor != tc.minor || !strings.Contains(err.Error(), tc.library) || !strings.Contains(err.Error(), "targets 1.33") {
			t.Errorf("%s on 1.33: %v, want it to need 1.%d and %s", tc.expr, err, tc.minor, tc.library)
		}
	}
	if _, err := CompilePolicy(`object.metadata.name ==`, kubeversion.Newest()); err == nil || errors.As(err, new(*NeedsError)) {
		t.Errorf("a syntax error: %v, want the compile error alone", err)
	}
}

func release(t *testing.T, minor int) kubeversion.Release {
	t.Helper()
	for _, r := range kubeversion.Supported() {
		if r.Minor == minor {
			return r
		}
	}
	return kubeversion.Release{Minor: minor}
}
