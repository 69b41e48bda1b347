package image

import "testing"

func TestSourceURLDropsCredentialsAndGitSuffix(t *testing.T) {
	for _, tc := range []struct{ remote, want string }{
		{"git@github.com:acme/uds-core.git", "https://github.com/acme/uds-core"},
		{"https://user:token@github.com/acme/uds-core.git", "https://github.com/acme/uds-core"},
		{"ssh://git@gitlab.example.com:2222/acme/uds-core.git", "https://gitlab.example.com/acme/uds-core"},
		{"https://github.com/acme/uds-core", "https://github.com/acme/uds-core"},
		{"/srv/git/uds-core.git", ""},
		{"", ""},
	} {
		if got := sourceURL(tc.remote); got != tc.want {
			t.Errorf("sourceURL(%q) = %q, want %q", tc.remote, got, tc.want)
		}
	}
}
