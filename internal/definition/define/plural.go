package define

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/internal/definition/scheme"
	"github.com/vigilkit/vigil/internal/definition/spec"
)

// PluralAnnotation carries the plural of a kind KindWithPlural names on its
// prototype, for the module it is declared in to record.
const PluralAnnotation = "vigil.dev/plural"

// plural is a kind's resource as the module was told it, and where.
type plural struct{ resource, site string }

// KindWithPlural is Kind carrying plural, the kind's resource, which the
// module a binding, gate or lister of it is declared in records. A plural
// that is not a lowercase resource name panics, naming site.
func KindWithPlural(site, group, version, kind, resource string) *unstructured.Unstructured {
	checkPlural(site, "KindWithPlural", group, version, kind, resource)
	u := Kind(group, version, kind)
	u.SetAnnotations(map[string]string{PluralAnnotation: resource})
	return u
}

// MetadataWithPlural is Metadata carrying plural, as KindWithPlural is Kind.
func MetadataWithPlural(site, group, version, kind, resource string) *metav1.PartialObjectMetadata {
	checkPlural(site, "MetadataWithPlural", group, version, kind, resource)
	m := Metadata(group, version, kind)
	m.SetAnnotations(map[string]string{PluralAnnotation: resource})
	return m
}

// checkPlural panics, naming site and the call, unless resource is a
// lowercase resource name.
func checkPlural(site, call, group, version, kind, resource string) {
	if errs := validation.IsDNS1123Label(resource); len(errs) > 0 {
		panic(fmt.Sprintf("%s: vigil.%s(%q, %q, %q, %q): the plural: expected a lowercase resource name, as the CRD's spec.names.plural: %s",
			site, call, group, version, kind, resource, strings.Join(errs, "; ")))
	}
}

// GVKOf is the kind of proto in the module's scheme; a prototype of
// KindWithPlural or MetadataWithPlural has its plural recorded, declared at
// site.
func (m *Module) GVKOf(site string, proto client.Object) (schema.GroupVersionKind, error) {
	gvk, err := scheme.GVKOf(m.Scheme, proto)
	if err != nil {
		return gvk, err
	}
	switch proto.(type) {
	case *unstructured.Unstructured, *metav1.PartialObjectMetadata:
		if p := proto.GetAnnotations()[PluralAnnotation]; p != "" {
			m.setPlural(site, gvk.GroupKind(), p)
		}
	}
	return gvk, nil
}

// setPlural records resource as the plural of gk, declared at site; one
// kind given two plurals is a mistake.
func (m *Module) setPlural(site string, gk schema.GroupKind, resource string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if was, ok := m.plurals[gk]; ok {
		if was.resource != resource {
			m.errs = append(m.errs, fmt.Errorf("%s: the resource of %s is %q here and %q at %s: a kind has one plural, as its CRD's spec.names.plural names it", site, gk, resource, was.resource, was.site))
		}
		return
	}
	if m.plurals == nil {
		m.plurals = map[schema.GroupKind]plural{}
	}
	m.plurals[gk] = plural{resource: resource, site: site}
}

// resolvePlurals gives out the module's plurals, and its bindings and
// checks the plural of the kind their requests are for. m.mu is held.
func (m *Module) resolvePlurals(out *spec.Module) {
	if len(m.plurals) == 0 {
		return
	}
	out.Plurals = map[schema.GroupKind]string{}
	for gk, p := range m.plurals {
		out.Plurals[gk] = p.resource
	}
	for i := range out.Bindings {
		out.Bindings[i].Plural = out.Plurals[out.Bindings[i].ResourceKind().GroupKind()]
	}
	for i := range out.Checks {
		out.Checks[i].Plural = out.Plurals[out.Checks[i].ResourceKind().GroupKind()]
	}
}
