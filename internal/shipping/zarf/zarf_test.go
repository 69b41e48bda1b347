package zarf_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"sigs.k8s.io/yaml"

	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/shipping/zarf"
)

// The package definition a module's zarf command writes is valid against
// Zarf's published schema (testdata/zarf.schema.json), names the module's
// chart, written beside it and loadable by Helm, in the module's namespace,
// and carries the image the chart runs.
func TestPackageIsValidAgainstZarfsSchema(t *testing.T) {
	m := &spec.Module{SchemaVersion: spec.SchemaVersion, Name: "uds-core", Namespace: "pepr-system", Version: "v1.2.0", TimeoutSeconds: 10}
	const image = "ghcr.io/acme/uds-core:1.2.0@sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	dir := t.TempDir()
	if err := zarf.Write(m, dir, image); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "zarf.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	schema, err := c.Compile("testdata/zarf.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := schema.Validate(doc); err != nil {
		t.Fatalf("zarf.yaml is not valid against Zarf's schema: %v\n%s", err, data)
	}
	// The schema refuses what Zarf refuses: a component without a name.
	bad := strings.Replace(string(data), "- charts:", "- nameless: true\n  charts:", 1)
	var badDoc any
	if err := yaml.Unmarshal([]byte(strings.Replace(bad, "  name: uds-core\n  required", "  required", 1)), &badDoc); err != nil {
		t.Fatal(err)
	}
	if err := schema.Validate(badDoc); err == nil {
		t.Errorf("Zarf's schema accepted a component without a name: the validation checks nothing")
	}

	var pkg zarf.Package
	if err := yaml.Unmarshal(data, &pkg); err != nil {
		t.Fatal(err)
	}
	if pkg.Kind != "ZarfPackageConfig" || pkg.Metadata.Name != "uds-core" || pkg.Metadata.Version != "1.2.0" || len(pkg.Components) != 1 {
		t.Fatalf("package %+v: want one component of ZarfPackageConfig uds-core 1.2.0", pkg)
	}
	comp := pkg.Components[0]
	if comp.Required == nil || !*comp.Required || len(comp.Images) != 1 || comp.Images[0] != image || len(comp.Charts) != 1 {
		t.Fatalf("component %+v: want it required, with the image and one chart", comp)
	}
	ch := comp.Charts[0]
	if ch.Namespace != "pepr-system" || ch.LocalPath != "chart" || ch.Version != "1.2.0" {
		t.Errorf("chart entry %+v: want namespace pepr-system, localPath chart, version 1.2.0", ch)
	}
	loaded, err := loader.Load(filepath.Join(dir, ch.LocalPath))
	if err != nil {
		t.Fatalf("the chart zarf.yaml names does not load: %v", err)
	}
	if loaded.Metadata.Name != ch.Name || loaded.Metadata.Version != ch.Version {
		t.Errorf("Chart.yaml says %s %s, zarf.yaml %s %s", loaded.Metadata.Name, loaded.Metadata.Version, ch.Name, ch.Version)
	}
	if !strings.Contains(string(data), "yaml-language-server: $schema=") {
		t.Errorf("zarf.yaml does not name its schema for editors:\n%s", data)
	}

	// Without an image there is nothing to package.
	if err := zarf.Write(m, t.TempDir(), ""); err == nil || !strings.Contains(err.Error(), "expected the module's image") {
		t.Errorf("Write without an image: %v, want an error asking for it", err)
	}
}
