package cmdutil

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/vigilkit/vigil/internal/definition/spec"
)

func TestExitCodeMapsOutcomes(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, ExitOK},
		{errors.New("boom"), ExitFailed},
		{fmt.Errorf("wait for crd: %w", context.DeadlineExceeded), ExitTimedOut},
		{context.Canceled, ExitFailed},
		{fmt.Errorf("gate crd: %w after 1s", spec.ErrTimedOut), ExitTimedOut},
	} {
		var b bytes.Buffer
		if got := ExitCode(&b, tc.err); got != tc.want {
			t.Errorf("ExitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
		if tc.err != nil && b.Len() == 0 {
			t.Errorf("ExitCode(%v) printed nothing", tc.err)
		}
	}
}

// A kubeconfig that does not exist is named in the error, with the ways to
// give one, whether it came from KUBECONFIG, the default or --kubeconfig.
func TestLoadConfigNamesMissingFile(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "") // not in a pod
	missing := filepath.Join(t.TempDir(), "nowhere", "kubeconfig")
	for _, tc := range []struct {
		name, flag, env string
		want            []string
	}{
		{"KUBECONFIG", "", missing, []string{"the kubeconfig " + missing + " (from KUBECONFIG) does not exist", "--kubeconfig FILE"}},
		{"default", "", "", []string{"the kubeconfig " + clientcmd.RecommendedHomeFile + " (from the default path) does not exist", "KUBECONFIG=FILE"}},
		{"flag", missing, "", []string{"the kubeconfig " + missing + " (from --kubeconfig) does not exist"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := os.Stat(clientcmd.RecommendedHomeFile); err == nil && tc.name == "default" {
				t.Skipf("%s exists here", clientcmd.RecommendedHomeFile)
			}
			t.Setenv("KUBECONFIG", tc.env)
			_, err := LoadConfig(tc.flag, "")
			if err == nil {
				t.Fatal("LoadConfig with no kubeconfig: no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// An error the command has printed already keeps its exit code and is not
// printed again.
func TestExitCodeDoesNotRepeatReportedErrors(t *testing.T) {
	var b bytes.Buffer
	err := Reported(fmt.Errorf("after 1s: %w", context.DeadlineExceeded))
	if got := ExitCode(&b, err); got != ExitTimedOut || b.Len() != 0 {
		t.Errorf("ExitCode(reported timeout) = %d and printed %q; want %d and nothing", got, b.String(), ExitTimedOut)
	}
	if got := ExitCode(&b, Reported(errors.New("boom"))); got != ExitFailed || b.Len() != 0 {
		t.Errorf("ExitCode(reported failure) = %d and printed %q; want %d and nothing", got, b.String(), ExitFailed)
	}
}

// The kubeconfig flags are declared once, with their names and defaults,
// and what they hold is what the config is loaded from.
func TestKubeFlagsDeclareKubeconfigAndContext(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "") // not in a pod
	var k KubeFlags
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	k.AddFlags(fs)
	for _, name := range []string{"kubeconfig", "context"} {
		f := fs.Lookup(name)
		if f == nil {
			t.Fatalf("--%s is not declared", name)
		}
		if f.DefValue != "" {
			t.Errorf("--%s defaults to %q, want empty", name, f.DefValue)
		}
	}
	missing := filepath.Join(t.TempDir(), "kubeconfig")
	if err := fs.Parse([]string{"--kubeconfig", missing, "--context", "kind"}); err != nil {
		t.Fatal(err)
	}
	if k.Kubeconfig != missing || k.Context != "kind" {
		t.Fatalf("flags hold %q and %q", k.Kubeconfig, k.Context)
	}
	_, err := k.ToRESTConfig()
	if err == nil || !strings.Contains(err.Error(), "the kubeconfig "+missing+" (from --kubeconfig) does not exist") {
		t.Errorf("ToRESTConfig with a missing --kubeconfig: %v", err)
	}
}
