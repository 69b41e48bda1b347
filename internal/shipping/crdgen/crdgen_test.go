package crdgen_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/vigilkit/vigil/internal/shipping/crdgen"
	"github.com/vigilkit/vigil/vigiltest"
)

var env *vigiltest.Env

func TestMain(m *testing.M) { os.Exit(vigiltest.Run(m, vigiltest.Options{}, &env)) }

// The Widget type's markers become its CRD's schema: the file written is an
// apiextensions.k8s.io/v1 CRD the API server takes, and it refuses a Widget
// the markers rule out.
func TestGenerateWritesTheTypesCRD(t *testing.T) {
	dir := t.TempDir()
	files, err := crdgen.Generate(dir, "./testdata/api/...")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "example.dev_widgets.yaml"); len(files) != 1 || files[0] != want {
		t.Fatalf("files %v, want [%s]", files, want)
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(data, &crd); err != nil {
		t.Fatalf("decode %s: %v\n%s", files[0], err, data)
	}
	if crd.Name != "widgets.example.dev" || crd.Spec.Scope != apiextensionsv1.NamespaceScoped ||
		len(crd.Spec.Versions) != 1 || !crd.Spec.Versions[0].Storage || crd.Spec.Versions[0].Subresources == nil {
		t.Fatalf("CRD %s, scope %s, versions %+v: want widgets.example.dev, Namespaced, v1 stored with a status subresource", crd.Name, crd.Spec.Scope, crd.Spec.Versions)
	}
	size := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["size"]
	if size.Minimum == nil || *size.Minimum != 1 || size.Maximum == nil || *size.Maximum != 10 {
		t.Errorf("spec.size's schema %+v: want the markers' minimum 1 and maximum 10", size)
	}

	if err := env.InstallCRDYAML(data); err != nil {
		t.Fatal(err)
	}
	ns := env.Namespace(t)
	widget := func(name string, size int64) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("example.dev/v1")
		u.SetKind("Widget")
		u.SetNamespace(ns)
		u.SetName(name)
		_ = unstructured.SetNestedField(u.Object, size, "spec", "size")
		return u
	}
	if err := env.Client.Create(t.Context(), widget("fits", 3)); err != nil {
		t.Errorf("a Widget of size 3: %v", err)
	}
	err = env.Client.Create(t.Context(), widget("too-small", 0))
	if err == nil || !strings.Contains(err.Error(), "spec.size") {
		t.Errorf("a Widget of size 0: %v, want the API server's schema to refuse spec.size", err)
	}
}

// Packages without a marked root type write nothing, and say what marks one.
func TestGenerateWithoutARootTypeSaysWhatToMark(t *testing.T) {
	_, err := crdgen.Generate(t.TempDir(), "./")
	if err == nil || !strings.Contains(err.Error(), "+kubebuilder:object:root=true") {
		t.Fatalf("Generate of a package without kinds: %v, want an error naming the markers", err)
	}
}
