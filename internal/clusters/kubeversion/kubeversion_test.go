package kubeversion

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{"", "v1.37.2", ""},
		{"1.34", "v1.34.4", ""},
		{"v1.33", "v1.33.13", ""},
		{"1.36.3", "v1.36.3", ""},
		{"v1.35.4", "v1.35.4", ""},
		{"1.36.1", "", "vigil builds v1.36.3 of 1.36"},
		{"1.32", "", "is not supported: vigil supports 1.33, 1.34, 1.35, 1.36, 1.37 (default 1.37)"},
		{"1.38", "", "is a preview (v1.38.0-beta.0), not supported yet"},
		{"2.0", "", "expected 1.MINOR"},
		{"1.x", "", "expected 1.MINOR"},
		{"1.034", "", "expected 1.MINOR"},
	} {
		r, err := Parse(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Parse(%q) = %v, %v; want an error with %q", tc.in, r, err, tc.err)
			}
			continue
		}
		if err != nil || r.Kubernetes != tc.want {
			t.Errorf("Parse(%q) = %v, %v; want %s", tc.in, r.Kubernetes, err, tc.want)
		}
	}
}

// The preview is accepted only when asked for, and the environment chooses
// the release when no flag does.
func TestPreviewAndEnvironment(t *testing.T) {
	t.Setenv(EnvPreview, "1")
	if r, err := Parse("1.38"); err != nil || !r.Preview || r.Staging() != "v0.38.0-beta.0" {
		t.Fatalf("Parse(1.38) with %s=1: %+v, %v", EnvPreview, r, err)
	}
	t.Setenv(Env, "1.35")
	if r, err := FromEnv(); err != nil || r.String() != "1.35" {
		t.Fatalf("FromEnv with %s=1.35: %v, %v", Env, r, err)
	}
	t.Setenv(Env, "1.20")
	if _, err := FromEnv(); err == nil || !strings.Contains(err.Error(), Env) || !strings.Contains(err.Error(), Names()) {
		t.Fatalf("FromEnv with %s=1.20: %v, want the variable named and the releases listed", Env, err)
	}
}

func TestRangeIsOrdered(t *testing.T) {
	all := Supported()
	for i := 1; i < len(all); i++ {
		if all[i].Minor != all[i-1].Minor+1 {
			t.Errorf("supported releases %v: want consecutive minors", all)
		}
	}
	if Oldest().Minor != 33 || Newest().Minor != 37 || Default().Minor != 37 {
		t.Errorf("oldest %s, newest %s, default %s: want 1.33, 1.37, 1.37", Oldest(), Newest(), Default())
	}
}
