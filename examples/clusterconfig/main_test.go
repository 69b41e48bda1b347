package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/vigiltest"
)

var env *vigiltest.Env

func TestMain(m *testing.M) {
	os.Exit(vigiltest.Run(m, vigiltest.Options{}, &env))
}

// logged waits until the process has logged want.
func readYAML(t *testing.T, file string) *unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(raw, &u.Object); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return u
}

// Exemptions count only from the exemptions namespace, unless the config
// allows all namespaces.
func TestExemptionsOnlyFromTheirNamespace(t *testing.T) {
	ex := func(ns, name string) *unstructured.Unstructured {
		u := readYAML(t, "exemption.yaml")
		u.SetNamespace(ns)
		u.SetName(name)
		return u
	}
	list := []*unstructured.Unstructured{ex("monitoring", "self-made"), ex("uds-policy-exemptions", "node-exporter")}
	if got, _, _ := matchExemption(names.Matcher(t.Context()), list[:1], "uds-policy-exemptions", "monitoring", "node-exporter-abc", PolicyPrivileged); got != "" {
		t.Errorf("an Exemption in the pod's own namespace matched: %s", got)
	}
	if got, _, _ := matchExemption(names.Matcher(t.Context()), list, "uds-policy-exemptions", "monitoring", "node-exporter-abc", PolicyPrivileged); got != "uds-policy-exemptions/node-exporter" {
		t.Errorf("match = %q, want the one in the exemptions namespace", got)
	}
	if got, _, _ := matchExemption(names.Matcher(t.Context()), list[:1], "", "monitoring", "node-exporter-abc", PolicyPrivileged); got != "monitoring/self-made" {
		t.Errorf("all namespaces allowed: match = %q, want monitoring/self-made", got)
	}
	s := settings{defaultsPath: "defaults.yaml"}
	spec, err := s.effective(readYAML(t, "clusterconfig.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if allowAllNsExemptions(spec) {
		t.Error("the defaults allow Exemptions from all namespaces; want only the exemptions namespace")
	}
	cc := readYAML(t, "clusterconfig.yaml")
	_ = unstructured.SetNestedField(cc.Object, true, "spec", "policy", "allowAllNsExemptions")
	if spec, err = s.effective(cc); err != nil || !allowAllNsExemptions(spec) {
		t.Errorf("a ClusterConfig with allowAllNsExemptions: true: %v, %v; want all namespaces allowed", spec, err)
	}
	t.Setenv("CLUSTERCONFIG_EXEMPTIONS_NAMESPACE", "")
	os.Unsetenv("CLUSTERCONFIG_EXEMPTIONS_NAMESPACE")
	if got := declareSettings(vigil.NewModule("uds-core", vigil.Options{})); got.exemptionsNamespace != "uds-policy-exemptions" {
		t.Errorf("exemptions namespace %q by default, want uds-policy-exemptions", got.exemptionsNamespace)
	}
}

// The defaults merge under what the ClusterConfig sets.
func TestEffectiveMergesOverDefaults(t *testing.T) {
	s := settings{defaultsPath: "defaults.yaml"}
	cc := readYAML(t, "clusterconfig.yaml")
	spec, err := s.effective(cc)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(spec)
	for _, want := range []string{`"clusterName":"demo-cluster"`, `"adminDomain":"admin.uds.dev"`, `"allowAllNsExemptions":false`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("effective spec %s lacks %s", raw, want)
		}
	}
	s.defaultsPath = filepath.Join(t.TempDir(), "missing.yaml")
	if _, err := s.defaults(true); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing defaults when required: %v, want not-exist", err)
	}
}
