package chart

import (
	"strconv"
	"strings"

	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/serving/registration"
)

// trustGuards are the names of the policies whose allowed identities the
// value trusted.allowed extends: the guards of the trusted namespaces and of
// the namespace provenance.
func trustGuards(m *spec.Module) map[string]bool {
	out := map[string]bool{}
	for _, t := range m.TrustedNamespaces {
		out[registration.TrustedGuardName(m.Name, t.Name)] = true
	}
	if m.Provenance != nil {
		out[registration.ProvenanceGuardName(m.Name)] = true
	}
	return out
}

// trustGuard makes a guard's allowed users and groups its own plus those of
// the value trusted.allowed: the installer's identity, which the chart's
// upgrades and uninstalls need when it is not allowed already.
func (g *gen) trustGuard(u map[string]any) {
	specm, _ := u["spec"].(map[string]any)
	vars, _ := specm["variables"].([]any)
	for _, v := range vars {
		v, _ := v.(map[string]any)
		var groups bool
		switch v["name"] {
		case registration.AllowedUsersVar:
		case registration.AllowedGroupsVar:
			groups = true
		default:
			continue
		}
		own := v["expression"].(string) // a JSON list of strings
		v["expression"] = g.sentinel(func(in string) string {
			return in + `expression: {{ include "vigil.identities" (dict "own" ` + strconv.Quote(own) + ` "extra" $.Values.trusted.allowed "groups" ` + map[bool]string{true: "true", false: "false"}[groups] + `) | quote }}` + "\n"
		})
	}
}

// trustHelpers is the named template vigil.identities: a JSON list of the
// own identities (a JSON list) and the usernames, or the groups (without
// "group:"), among extra.
const trustHelpers = `
{{/* A guard's allowed users or groups: its own, and those of trusted.allowed. */}}
{{- define "vigil.identities" -}}
{{- $out := fromJsonArray .own -}}
{{- $groups := .groups -}}
{{- range .extra -}}
{{- if and $groups (hasPrefix "` + spec.GroupPrefix + `" .) -}}
{{- $out = append $out (trimPrefix "` + spec.GroupPrefix + `" .) -}}
{{- else if and (not $groups) (not (hasPrefix "` + spec.GroupPrefix + `" .)) -}}
{{- $out = append $out . -}}
{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}
`

// trustedValues documents trusted.allowed, when the module has anything it
// extends.
func trustedValues(m *spec.Module) string {
	if len(trustGuards(m)) == 0 {
		return ""
	}
	var names []string
	for _, t := range m.TrustedNamespaces {
		names = append(names, t.Name)
	}
	var b strings.Builder
	b.WriteString("# Who else may create, delete and relabel the trusted namespaces")
	if len(names) > 0 {
		b.WriteString(" (" + strings.Join(names, ", ") + ")")
	}
	if m.Provenance != nil {
		b.WriteString(",\n# and change the annotations that record who created a namespace")
	}
	b.WriteString(":\n# usernames, and groups as group:<name>, besides those the module names.\n")
	b.WriteString("# Add the identity that installs and upgrades this chart when it is not\n# in group system:masters, such as system:serviceaccount:ci:deployer.\n")
	b.WriteString("trusted:\n  allowed: []\n\n")
	return b.String()
}
