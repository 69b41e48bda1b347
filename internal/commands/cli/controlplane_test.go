package cli_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigilkit/vigil/internal/clusters/controlplane"
	"github.com/vigilkit/vigil/internal/clusters/kubeversion"
	"github.com/vigilkit/vigil/internal/commands/cli"
	"github.com/vigilkit/vigil/internal/commands/cmdutil"
	"github.com/vigilkit/vigil/vigiltest"
)

// `vigil controlplane up` gives a kubeconfig that the bundled kubectl can use,
// and removes it again on interrupt.
func TestControlPlaneUpServesKubectl(t *testing.T) {
	r, err := kubeversion.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := controlplane.FindBinaries(r); err != nil {
		t.Fatalf("this test runs the real control plane: %v", err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ready := make(chan string, 1)
	var out, progress vigiltest.Buffer
	opts := &cli.UpOptions{KubeconfigPath: path, Progress: &progress, Ready: func(p string) { ready <- p }}
	done := make(chan error, 1)
	go func() { done <- opts.Run(ctx, &out) }()

	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("up ended before it was ready: %v\n%s", err, progress.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("up not ready within 60s\n%s", progress.String())
	}
	if !strings.Contains(out.String(), "export KUBECONFIG="+path) {
		t.Fatalf("output lacks the export line:\n%s", out.String())
	}
	dir, _ := controlplane.FindBinaries(r)
	kubectl := exec.CommandContext(t.Context(), filepath.Join(dir, "kubectl"), "get", "ns", "-o", "name")
	kubectl.Env = append(os.Environ(), "KUBECONFIG="+path)
	got, err := kubectl.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl get ns: %v\n%s", err, got)
	}
	if !strings.Contains(string(got), "namespace/default") {
		t.Fatalf("kubectl get ns = %q, want it to list default", got)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("up returned %v after interrupt", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("up did not stop within 30s of the interrupt")
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("kubeconfig %s still there after stop", path)
	}
}

func TestExecuteExitCodes(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := cli.Execute(t.Context(), []string{"controlplane", "up", "--kubeconfig", ""}, &out, &errOut); code != cmdutil.ExitFailed {
		t.Fatalf("exit code %d, want %d", code, cmdutil.ExitFailed)
	}
	if !strings.Contains(errOut.String(), "--kubeconfig: expected a file path") {
		t.Fatalf("stderr %q does not explain the bad flag", errOut.String())
	}
	errOut.Reset()
	if code := cli.Execute(t.Context(), []string{"no-such-verb"}, &out, &errOut); code != cmdutil.ExitFailed {
		t.Fatalf("unknown verb: exit code %d, want %d", code, cmdutil.ExitFailed)
	}
}
