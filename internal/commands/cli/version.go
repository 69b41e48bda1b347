package cli

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Version and Commit are set by `make release` (-ldflags -X); a binary built
// otherwise reads them from its build information: the module's version
// when installed as `go install github.com/vigilkit/vigil/cmd/vigil@v0.1.0`,
// the commit when built in a git checkout.
var (
	Version = ""
	Commit  = ""
)

// version is what `vigil version` prints: the release, the commit (with
// -dirty when the checkout had changes), and the Go that built it.
func version(info *debug.BuildInfo, ok bool) (release, commit string) {
	release, commit = Version, Commit
	if !ok {
		info = &debug.BuildInfo{}
	}
	if release == "" {
		release = info.Main.Version
	}
	if release == "" {
		release = "(devel)"
	}
	if commit == "" {
		var rev, modified string
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
		commit = rev
		if commit == "" {
			commit = "unknown"
		} else if modified == "true" {
			commit += "-dirty"
		}
	}
	return release, commit
}

func newVersionCommand(out io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print vigil's version, the commit it was built from and the Go that built it",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			release, commit := version(debug.ReadBuildInfo())
			_, err := fmt.Fprintf(out, "vigil %s (commit %s, %s %s/%s)\n", release, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return err
		},
	}
}
