package spec

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// CRD is a CustomResourceDefinition the module ships with its install: a
// kind of its own, applied before its pods (the chart's crds/).
type CRD struct {
	// Name is the CRD's, <plural>.<group>.
	Name     string   `json:"name"`
	Group    string   `json:"group"`
	Kind     string   `json:"kind"`
	Scope    string   `json:"scope"`
	Versions []string `json:"versions"`
	// Sum is a hash of the whole definition, so that the module's
	// fingerprint changes with its schema.
	Sum  string `json:"sum"`
	Site string `json:"site"`
	// Object is the definition itself.
	Object *apiextensionsv1.CustomResourceDefinition `json:"-"`
}

// OwnCRD is the module's CRD named name (<plural>.<group>), if it ships
// one.
func (m *Module) OwnCRD(name string) (CRD, bool) {
	for _, c := range m.CRDs {
		if c.Name == name {
			return c, true
		}
	}
	return CRD{}, false
}
