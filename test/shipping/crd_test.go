package shipping

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/gate"
	"github.com/vigilkit/vigil/internal/testsupport/testkit"
	"github.com/vigilkit/vigil/vigiltest"
)

// widgeted ships the Widget CRD and waits, in phase 0, for it to be
// established.
func widgeted(t *testing.T) *vigil.Module {
	crd, err := os.ReadFile("../../examples/phases/widgets-crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := vigil.NewModule("widgeted", vigil.Options{})
	vigil.CRDs(m, crd)
	vigil.WaitFor(m, &apiextensionsv1.CustomResourceDefinition{}).WithName("widgets.example.vigil.dev").ToBe(gate.Established())
	return m
}

// The author's CRDs ship: in manifests (labelled as the module's, before
// its Deployments), in the chart's crds/, and in plan — where a gate
// waiting for one says the install applies it.
func TestTheModulesOwnCRDsShip(t *testing.T) {
	m := widgeted(t)
	out := testkit.CaptureStdout(t, func() {
		if code := vigil.Execute(t.Context(), m, []string{"manifests", "--image", "example.com/widgeted:1"}); code != 0 {
			t.Errorf("manifests: exit %d", code)
		}
	})
	ms, err := vigiltest.DecodeManifests([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	crdAt, deployAt := -1, -1
	for i, o := range ms.Objects {
		switch {
		case o.GetKind() == "CustomResourceDefinition" && o.GetName() == "widgets.example.vigil.dev":
			crdAt = i
			if o.GetLabels()["app.kubernetes.io/name"] != "widgeted" {
				t.Errorf("the CRD's labels %v: want the module's", o.GetLabels())
			}
		case o.GetKind() == "Deployment" && deployAt < 0:
			deployAt = i
		}
	}
	if crdAt < 0 || deployAt < 0 || crdAt > deployAt {
		t.Fatalf("manifests: the CRD at %d, the first Deployment at %d: want the CRD shipped before the pods", crdAt, deployAt)
	}

	dir := t.TempDir()
	if code := vigil.Execute(t.Context(), m, []string{"chart", "--image", "example.com/widgeted:1", "-o", dir}); code != 0 {
		t.Fatalf("chart: exit %d", code)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "crds", "*"))
	var inCRDs []string
	for _, f := range files {
		data, _ := os.ReadFile(f)
		if strings.Contains(string(data), "name: widgets.example.vigil.dev") {
			inCRDs = append(inCRDs, filepath.Base(f))
		}
	}
	if len(inCRDs) != 1 {
		t.Errorf("the chart's crds/ %v: want the Widget CRD in one file", files)
	}

	plan := testkit.CaptureStdout(t, func() { vigil.Execute(t.Context(), m, []string{"plan"}) })
	for _, want := range []string{"its own kinds (CRDs shipped with the install", "widgets.example.vigil.dev: Widget (v1, Namespaced; crd_test.go:", "(the module's own CRD: its install applies it)"} {
		if !strings.Contains(plan, want) {
			t.Errorf("plan lacks %q:\n%s", want, plan)
		}
	}
}

// What is not a CRD is a definition mistake at the CRDs call.
func TestCRDsMistakes(t *testing.T) {
	for name, tc := range map[string]struct{ yaml, want string }{
		"a ConfigMap": {"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n", "expected apiVersion apiextensions.k8s.io/v1 and kind CustomResourceDefinition, got v1 ConfigMap"},
		"a wrong name": {"apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: widgets}\nspec: {group: a.dev, scope: Namespaced, names: {plural: widgets, kind: Widget}, versions: [{name: v1, served: true, storage: true}]}\n",
			"expected the name widgets.a.dev (<plural>.<group>)"},
		"nothing": {"# nothing\n", "no CustomResourceDefinition in the YAML given"},
	} {
		t.Run(name, func(t *testing.T) {
			m := vigil.NewModule("widgeted", vigil.Options{})
			vigil.CRDs(m, []byte(tc.yaml))
			err := m.Verify()
			for _, want := range []string{"crd_test.go:", tc.want} {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("Verify: %v; want %q", err, want)
				}
			}
		})
	}
}
