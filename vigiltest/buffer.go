package vigiltest

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// Buffer is a bytes.Buffer safe for concurrent use: give it to a process's
// stderr or a logger and read it from the test while they still write.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// KubeConfigFile writes an admin kubeconfig into the test's temporary folder
// and returns its path, for processes and tools (kubectl, a module binary).
func (e *Env) KubeConfigFile(t testing.TB) string {
	t.Helper()
	data, err := e.KubeConfig()
	if err != nil {
		t.Fatalf("kubeconfig: %v", err)
	}
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
