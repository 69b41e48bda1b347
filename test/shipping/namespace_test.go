package shipping

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/internal/commands/cmdutil"
	"github.com/vigilkit/vigil/internal/testsupport/testkit"
	"github.com/vigilkit/vigil/vigiltest"
)

// settled waits, in the module's own namespace, for its settings.
func settled() *vigil.Module {
	m := vigil.NewModule("settled", vigil.Options{Namespace: "settled-system"})
	vigil.WaitFor(m, &corev1.ConfigMap{}).WithName("settings").InNamespace(m.Namespace()).ToBeCreated(nil)
	return m
}

// One namespace truth: VIGIL_NAMESPACE, set when rendering, resolves the
// definition — and what it writes as m.Namespace(), a gate here — for that
// namespace; every container gets it from its pod's namespace, so the role
// resolves the same; --namespace cannot move the objects without the
// definition.
func TestTheModulesNamespaceIsOneTruth(t *testing.T) {
	if m := settled(); m.Namespace() != "settled-system" {
		t.Fatalf("without %s: namespace %s, want the option's", "VIGIL_NAMESPACE", m.Namespace())
	}
	t.Setenv("VIGIL_NAMESPACE", "moved")
	m := settled()
	if m.Namespace() != "moved" {
		t.Fatalf("with VIGIL_NAMESPACE=moved: namespace %s", m.Namespace())
	}
	out := testkit.CaptureStdout(t, func() {
		if code := vigil.Execute(t.Context(), m, []string{"manifests", "--image", "example.com/settled:1"}); code != 0 {
			t.Errorf("manifests: exit %d", code)
		}
	})
	ms, err := vigiltest.DecodeManifests([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range ms.Objects {
		ns := o.GetNamespace()
		if o.GetKind() == "Namespace" {
			ns = o.GetName()
		}
		if strings.Contains(ns, "settled-system") {
			t.Errorf("%s %s is in %s: want everything moved", o.GetKind(), o.GetName(), ns)
		}
		if o.GetKind() == "Role" && strings.Contains(o.GetName(), "gate") && ns != "moved" {
			t.Errorf("the gate's Role %s is in %q, want moved", o.GetName(), ns)
		}
	}
	ds, err := ms.Deployments()
	if err != nil || len(ds) == 0 {
		t.Fatalf("deployments: %v", err)
	}
	for _, c := range append(ds[0].Spec.Template.Spec.InitContainers, ds[0].Spec.Template.Spec.Containers...) {
		found := false
		for _, e := range c.Env {
			found = found || (e.Name == "VIGIL_NAMESPACE" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace")
		}
		if !found {
			t.Errorf("container %s has no VIGIL_NAMESPACE from its pod's namespace: %v", c.Name, c.Env)
		}
	}

	var stderr vigiltest.Buffer
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperManifestsElsewhere$")
	cmd.Env = append(os.Environ(), "VIGIL_HELPER=1", "VIGIL_NAMESPACE=moved")
	cmd.Stderr = &stderr
	err = cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != cmdutil.ExitFailed {
		t.Fatalf("manifests --namespace elsewhere: %v; want exit 1", err)
	}
	for _, want := range []string{"--namespace elsewhere: the module's definition was resolved for namespace moved", "VIGIL_NAMESPACE=elsewhere settled manifests"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
}

// TestHelperManifestsElsewhere is the module binary of the test above,
// asked to render for another namespace than its definition's.
func TestHelperManifestsElsewhere(t *testing.T) {
	if os.Getenv("VIGIL_HELPER") != "1" {
		t.Skip("run by TestTheModulesNamespaceIsOneTruth")
	}
	os.Exit(vigil.Execute(t.Context(), settled(), []string{"manifests", "--image", "example.com/settled:1", "--namespace", "elsewhere"}))
}
