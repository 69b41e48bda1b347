package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/vigilkit/vigil/internal/commands/cmdutil"
)

// status and monitor say what is wrong with their flags before they read a
// cluster, and exit 1.
func TestStatusAndMonitorFlagMistakes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"status", "-o", "yaml"}, `-o "yaml": expected text or json`},
		{[]string{"status", "a", "b"}, "accepts at most 1 arg"},
		{[]string{"monitor"}, "accepts 1 arg"},
		{[]string{"monitor", "m", "--verdict", "rejected"}, `--verdict "rejected": expected one of allowed, denied, mutated, warned`},
		{[]string{"monitor", "m", "-o", "wide"}, `-o "wide": expected text or json`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := Execute(context.Background(), tc.args, &out, &errOut); code != cmdutil.ExitFailed {
				t.Errorf("exit %d, want %d", code, cmdutil.ExitFailed)
			}
			if !strings.Contains(errOut.String(), tc.want) {
				t.Errorf("stderr %q lacks %q", errOut.String(), tc.want)
			}
		})
	}
}
