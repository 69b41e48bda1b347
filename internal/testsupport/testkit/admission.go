package testkit

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/internal/serving/certs"
	"github.com/vigilkit/vigil/vigiltest"
)

// metricsAddrs maps the address of each admission role RunAdmission started to
// the address of its /metrics.
var metricsAddrs sync.Map

// MetricsURL is the /metrics URL of the admission role RunAdmission runs on addr.
func MetricsURL(addr string) string {
	m, _ := metricsAddrs.Load(addr)
	return fmt.Sprintf("http://%v/metrics", m)
}

// RunAdmission runs `<module> admission` in process on addr with the given
// flags, its /metrics on a free port (see MetricsURL), until the returned stop
// is called or the test ends; stop fails the test if the role did not exit
// cleanly within 30 s.
func RunAdmission(t testing.TB, m *vigil.Module, addr string, flags ...string) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	metrics := vigiltest.FreeAddr(t)
	metricsAddrs.Store(addr, metrics)
	go func() {
		done <- vigil.Execute(ctx, m, append([]string{"admission", "--addr", addr, "--metrics-addr", metrics}, flags...))
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case code := <-done:
				if code != 0 {
					t.Errorf("admission exited %d", code)
				}
			case <-time.After(30 * time.Second):
				t.Error("admission did not stop within 30s")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// ServingDir makes a CA and a folder holding a serving certificate it issued
// for 127.0.0.1, laid out as a Secret volume (see WriteServing).
func ServingDir(t testing.TB) (*certs.CA, string) {
	ca, err := certs.NewCA("test-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	WriteServing(t, ca, dir)
	return ca, dir
}

// WriteServing issues a serving certificate into dir laid out as the kubelet
// lays out a Secret volume: tls.crt and tls.key are links into ..data, a link
// to a timestamped folder that an update replaces with a new one in one
// rename, after which the old folder is removed.
func WriteServing(t testing.TB, ca *certs.CA, dir string) {
	t.Helper()
	serving, err := ca.Issue([]string{"127.0.0.1", "localhost"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	version := filepath.Join(dir, fmt.Sprintf("..%d", time.Now().UnixNano()))
	if err := os.Mkdir(version, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"tls.crt": serving.CertPEM, "tls.key": serving.KeyPEM, "ca.crt": ca.CertPEM} {
		if err := os.WriteFile(filepath.Join(version, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old, _ := os.Readlink(filepath.Join(dir, "..data"))
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(version), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"tls.crt", "tls.key", "ca.crt"} {
		link := filepath.Join(dir, name)
		if _, err := os.Lstat(link); os.IsNotExist(err) {
			if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
				t.Fatal(err)
			}
		}
	}
	if old != "" {
		if err := os.RemoveAll(filepath.Join(dir, old)); err != nil {
			t.Fatal(err)
		}
	}
}
