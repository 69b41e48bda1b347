package define

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"slices"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/vigilkit/vigil/internal/definition/spec"
)

// AddCRDs records the CustomResourceDefinitions of data, one or more YAML
// documents, as the module's own, declared at site; each must be an
// apiextensions.k8s.io/v1 CustomResourceDefinition named <plural>.<group>
// with one storage version.
func (m *Module) AddCRDs(site string, data []byte) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	found := 0
	for i := 1; ; i++ {
		doc, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			m.Recordf(site, "CRDs: document %d: %v", i, err)
			return
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(doc, &crd); err != nil {
			m.Recordf(site, "CRDs: document %d is not a CustomResourceDefinition: %v", i, err)
			continue
		}
		if problem := crdProblem(&crd); problem != "" {
			m.Recordf(site, "CRDs: document %d (%s): %s", i, crd.Name, problem)
			continue
		}
		found++
		sum := sha256.Sum256(doc)
		c := spec.CRD{Name: crd.Name, Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind, Scope: string(crd.Spec.Scope), Sum: hex.EncodeToString(sum[:8]), Site: site, Object: &crd}
		for _, v := range crd.Spec.Versions {
			c.Versions = append(c.Versions, v.Name)
		}
		m.setPlural(site, schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}, crd.Spec.Names.Plural)
		m.mu.Lock()
		if slices.ContainsFunc(m.crds, func(o spec.CRD) bool { return o.Name == c.Name }) {
			m.errs = append(m.errs, fmt.Errorf("%s: CRDs: %s is declared twice", site, c.Name))
		} else {
			m.crds = append(m.crds, c)
		}
		m.mu.Unlock()
	}
	if found == 0 {
		m.Recordf(site, "CRDs: no CustomResourceDefinition in the YAML given: expected one or more documents of kind CustomResourceDefinition (apiextensions.k8s.io/v1), such as the files controller-gen writes")
	}
}

// crdProblem says what keeps crd from being installed; "" when nothing.
func crdProblem(crd *apiextensionsv1.CustomResourceDefinition) string {
	storage := 0
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			storage++
		}
	}
	switch {
	case crd.APIVersion != "apiextensions.k8s.io/v1" || crd.Kind != "CustomResourceDefinition":
		return fmt.Sprintf("expected apiVersion apiextensions.k8s.io/v1 and kind CustomResourceDefinition, got %s %s", crd.APIVersion, crd.Kind)
	case crd.Spec.Group == "" || crd.Spec.Names.Plural == "" || crd.Spec.Names.Kind == "":
		return "expected spec.group, spec.names.plural and spec.names.kind"
	case crd.Name != crd.Spec.Names.Plural+"."+crd.Spec.Group:
		return fmt.Sprintf("expected the name %s.%s (<plural>.<group>), as the API server requires", crd.Spec.Names.Plural, crd.Spec.Group)
	case crd.Spec.Scope != apiextensionsv1.NamespaceScoped && crd.Spec.Scope != apiextensionsv1.ClusterScoped:
		return fmt.Sprintf("spec.scope %q: expected Namespaced or Cluster", crd.Spec.Scope)
	case storage != 1:
		return fmt.Sprintf("expected exactly one version with storage: true, got %d", storage)
	}
	return ""
}
