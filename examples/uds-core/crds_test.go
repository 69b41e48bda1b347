package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// The Exemption schema in testdata/crds admits exactly the policies the
// port enforces: a policy added to the port without the schema would be
// refused by the API server in an Exemption, and one only in the schema
// would be accepted and ignored.
func TestExemptionSchemaNamesThePortsPolicies(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "crds", "exemptions.uds.dev.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(data, &crd); err != nil {
		t.Fatal(err)
	}
	if len(crd.Spec.Versions) != 1 {
		t.Fatalf("expected one version, got %d", len(crd.Spec.Versions))
	}
	entry := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["exemptions"].Items.Schema
	var schema []string
	for _, e := range entry.Properties["policies"].Items.Schema.Enum {
		schema = append(schema, string(e.Raw[1:len(e.Raw)-1]))
	}
	var port []string
	for _, p := range AllPolicies {
		port = append(port, string(p))
	}
	slices.Sort(schema)
	slices.Sort(port)
	if !slices.Equal(schema, port) {
		t.Errorf("the Exemption schema's policies differ from AllPolicies:\nschema: %v\nport:   %v", schema, port)
	}
}
