package labeler

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/vigilkit/vigil/vigiltest"
)

// A definition that depends on the environment (the setting LABELER_CHECKS
// adds a validation) rendered with one environment and run with another,
// as when a container's variable is overridden: the
// role refuses to serve, naming what differs, instead of serving a module
// other than the one its manifests registered. With the environment the
// manifests were rendered with, it passes the check.
func TestARoleRefusesADefinitionOtherThanItsManifests(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "labeler")
	if out, err := exec.Command("go", "build", "-o", bin, labelerDir).CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	render := exec.Command(bin, "manifests", "--image", "registry.example/labeler:1")
	render.Env = append(os.Environ(), "LABELER_CHECKS=webhook")
	rendered, err := render.Output()
	if err != nil {
		t.Fatalf("manifests: %v", err)
	}
	ms, err := vigiltest.DecodeManifests(rendered)
	if err != nil {
		t.Fatal(err)
	}
	d, err := ms.Deployment("admission")
	if err != nil {
		t.Fatal(err)
	}
	var carried []string
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		if strings.HasPrefix(e.Name, "VIGIL_SPEC_") {
			carried = append(carried, e.Name+"="+e.Value)
		}
	}
	if !slices.ContainsFunc(d.Spec.Template.Spec.Containers[0].Env, func(e corev1.EnvVar) bool { return e.Name == "LABELER_CHECKS" && e.Value == "webhook" }) {
		t.Errorf("the admission container does not carry the setting LABELER_CHECKS=webhook it was rendered with: %v", d.Spec.Template.Spec.Containers[0].Env)
	}
	if len(carried) != 2 || d.Spec.Template.Annotations["vigil.dev/spec-hash"] == "" {
		t.Fatalf("the admission container carries %v and its pod template the annotation %q; want VIGIL_SPEC_HASH and VIGIL_SPEC_PARTS, and the hash",
			carried, d.Spec.Template.Annotations["vigil.dev/spec-hash"])
	}

	run := func(extra ...string) (int, string) {
		env := slices.DeleteFunc(os.Environ(), func(e string) bool {
			return strings.HasPrefix(e, "LABELER_") || strings.HasPrefix(e, "KUBECONFIG=")
		})
		cmd := exec.Command(bin, "admission")
		cmd.Env = append(append(append(env, carried...), "KUBECONFIG="+filepath.Join(t.TempDir(), "none")), extra...)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), string(out)
	}
	code, out := run()
	if code != 1 || !strings.Contains(out, "this container was rendered from another definition than this binary resolves") ||
		!strings.Contains(out, "they differ in: bindings") || !strings.Contains(out, "Render the manifests or the chart again") {
		t.Errorf("without LABELER_CHECKS: exit %d, output:\n%s\nwant exit 1 naming the bindings and how to render again", code, out)
	}
	if _, out := run("LABELER_CHECKS=webhook"); strings.Contains(out, "rendered from another definition") {
		t.Errorf("with the environment it was rendered with, the role refused:\n%s", out)
	}
}
