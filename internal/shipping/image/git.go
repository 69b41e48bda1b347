package image

import (
	"context"
	"net/url"
	"os/exec"
	"strings"
)

// gitLabels reads the OCI labels from the git repository dir is in, if any:
// what is not found is left out.
func gitLabels(ctx context.Context, dir string) map[string]string {
	labels := map[string]string{}
	git := func(args ...string) string {
		cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
		out, err := cmd.Output()
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(out))
	}
	if rev := git("rev-parse", "HEAD"); rev != "" {
		labels[LabelRevision] = rev
	}
	if src := sourceURL(git("config", "--get", "remote.origin.url")); src != "" {
		labels[LabelSource] = src
	}
	if v := git("describe", "--tags", "--always"); v != "" {
		labels[LabelVersion] = v
	}
	return labels
}

// sourceURL turns a git remote into a browsable https URL, without the
// credentials an https remote may carry: git@github.com:acme/x.git and
// https://user:token@github.com/acme/x.git both become
// https://github.com/acme/x.
func sourceURL(remote string) string {
	if remote == "" {
		return ""
	}
	if !strings.Contains(remote, "://") {
		// scp-like: [user@]host:path
		host, path, ok := strings.Cut(remote, ":")
		if !ok {
			return ""
		}
		if _, h, found := strings.Cut(host, "@"); found {
			host = h
		}
		remote = "https://" + host + "/" + strings.TrimPrefix(path, "/")
	}
	u, err := url.Parse(remote)
	if err != nil || u.Host == "" {
		return ""
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		// ssh://, git://: the same repository's web address, without the port
		u.Scheme, u.Host = "https", u.Hostname()
	}
	u.User = nil
	u.Path = strings.TrimSuffix(u.Path, ".git")
	u.RawQuery, u.Fragment = "", ""
	return u.String()
}
