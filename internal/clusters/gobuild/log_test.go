package gobuild

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestProgressLogCountsCompiledPackages(t *testing.T) {
	var p progressLog
	p.Write([]byte("go: downloading k8s.io/api v0.37.2\nk8s.io/apimachinery/pkg/types\nk8s.io/api/c"))
	p.Write([]byte("ore/v1\n# some/pkg\nerror: bad thing\n"))
	if got := p.summary("build"); got != "2 packages compiled, last k8s.io/api/core/v1" {
		t.Fatalf("summary = %q", got)
	}
	if got := p.summary("get"); got != "resolving modules, 1 downloaded" {
		t.Fatalf("summary = %q", got)
	}
	if !strings.Contains(p.tail(), "error: bad thing") {
		t.Fatalf("tail %q lacks the last error line", p.tail())
	}
}

// A failing go command's error carries its last lines; a heartbeat says
// what is being built while it runs.
func TestRunReportsAndFails(t *testing.T) {
	var progress strings.Builder
	_, err := Run(context.Background(), Options{Dir: t.TempDir(), Progress: &progress, Heartbeat: 10 * time.Millisecond, Prefix: "test: ", Label: "nothing"},
		"go", "build", "-v", "./does-not-exist")
	if err == nil || !strings.Contains(err.Error(), "go build -v ./does-not-exist") || !strings.Contains(err.Error(), "does-not-exist") {
		t.Fatalf("err = %v, want the command and its output", err)
	}
	out, err := Run(context.Background(), Options{}, "go", "env", "GOOS")
	if err != nil || strings.TrimSpace(string(out)) == "" {
		t.Fatalf("go env GOOS: %q, %v", out, err)
	}
}
