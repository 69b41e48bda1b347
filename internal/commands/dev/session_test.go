package dev

import (
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/vigilkit/vigil/internal/testsupport/testenv"
)

// On its embedded control plane, vigil dev says where the kubeconfig is and
// gives a kubectl line to paste, so that the user can create what the gates
// wait for.
func TestEmbeddedControlPlanePrintsKubeconfig(t *testing.T) {
	testenv.ControlPlane(t)
	var mu sync.Mutex
	var texts []string
	s := &Session{tmp: t.TempDir(), opts: Options{Progress: os.Stderr, OnEvent: func(e Event) {
		mu.Lock()
		defer mu.Unlock()
		if e.Kind == ClusterUp {
			texts = append(texts, e.Text)
		}
	}}}
	t.Cleanup(s.release)
	if err := s.connect(t.Context()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	all := strings.Join(texts, "\n")
	if s.Kubeconfig == "" || !strings.Contains(all, "kubeconfig: "+s.Kubeconfig) {
		t.Errorf("timeline %q: want the kubeconfig path %q", all, s.Kubeconfig)
	}
	if want := "export KUBECONFIG=" + s.Kubeconfig + "; " + s.kubectl + " get namespaces"; s.kubectl == "" || !strings.Contains(all, want) {
		t.Errorf("timeline %q: want a kubectl line to paste, %q", all, want)
	}
	if _, err := os.Stat(s.kubectl); err != nil {
		t.Errorf("the kubectl named: %v", err)
	}
}
