package define

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/vigilkit/vigil/internal/definition/celversion"
	"github.com/vigilkit/vigil/internal/definition/spec"
)

// AddCheck records the declaration's Require, made at site: a CEL check the
// API server runs. A Go filter cannot precede it: the facade's
// filtered builder has no Require.
func (b *Binding) AddCheck(site, expression, message string) {
	m := b.m
	if len(b.Ops) == 0 {
		m.Recordf(site, "When(%s).Require: no operation: call IsCreated, IsUpdated, IsCreatedOrUpdated or IsDeleted first", b.GVK.Kind)
	}
	if len(b.Filters) > 0 {
		m.Recordf(site, "When(%s).Require: a check takes no filters (WithLabel, WithName and the like), the API server evaluates it alone: write the condition into the expression, as in !has(object.metadata.labels) || ...", b.GVK.Kind)
	}
	if strings.TrimSpace(expression) == "" {
		m.Recordf(site, "When(%s).Require: expected a CEL expression, got none", b.GVK.Kind)
	} else if _, err := celversion.CompilePolicy(expression, m.Kubernetes); err != nil {
		m.Recordf(site, "When(%s).Require(%q): expected a CEL expression the API server of Kubernetes %s compiles: %v", b.GVK.Kind, expression, m.Kubernetes, err)
	}
	if strings.TrimSpace(message) == "" || strings.ContainsAny(message, "\r\n") {
		m.Recordf(site, "When(%s).Require: message %q: expected the denial, one line", b.GVK.Kind, message)
	}
	c := spec.Check{
		Capability: b.Cap.Name, Name: b.Name, GVK: b.GVK, Operations: b.Ops, Namespaces: b.Cap.Namespaces,
		Parent: b.Parent, Subresource: b.Subresource, OptOut: b.Cap.OptOutLabel(), OptIn: b.Cap.OptInLabel(),
		Expression: expression, Message: message, Site: site,
	}
	if c.Name != "" {
		name := spec.CheckName(m.Name, c.Capability, c.Name)
		if problems := validation.IsDNS1123Subdomain(name); len(problems) > 0 {
			m.Recordf(site, "When(%s).Require: the policy's name %q: %s: name the capability or the check otherwise", b.GVK.Kind, name, strings.Join(problems, "; "))
		}
	}
	m.AddCheck(c)
}
