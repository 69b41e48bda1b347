package chart

import (
	"fmt"
	"strings"

	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/runtime/served"
	"github.com/vigilkit/vigil/internal/serving/registration"
)

// servedHelpers defines vigil.mutatingAdmissionPolicyAPIVersion: the first
// version of MutatingAdmissionPolicy the cluster serves, as Helm reads it
// from discovery at install (v1, then v1beta1, then v1alpha1). A cluster
// that serves none fails the install, naming the feature, the cluster's
// version and what to enable: the module is never installed without its
// stamp of namespace creators. Without a cluster (helm template) it is the
// version the cluster's release serves once enabled.
func servedHelpers(m *spec.Module) string {
	k := served.MutatingAdmissionPolicy
	var b strings.Builder
	b.WriteString("\n{{/* The version of MutatingAdmissionPolicy the cluster serves. */}}\n")
	b.WriteString(`{{- define "vigil.mutatingAdmissionPolicyAPIVersion" -}}` + "\n")
	for i, v := range k.Versions {
		gv := served.Group + "/" + v.Name
		kw := "else if"
		if i == 0 {
			kw = "if"
		}
		fmt.Fprintf(&b, "{{- %s .Capabilities.APIVersions.Has %q -}}\n%s\n", kw, gv+"/"+k.Name, gv)
	}
	var enable []string
	for _, v := range k.Versions {
		if v.Gated {
			enable = append(enable, fmt.Sprintf("on 1.%d and later before 1.%d, --feature-gates=%s=true --runtime-config=%s/%s=true", v.Since, k.Versions[0].Since, k.Name, served.Group, v.Name))
		}
	}
	// Without a cluster (helm template), Helm knows versions but no kinds
	// (a live cluster's discovery lists v1/Namespace): the version the
	// chart's kubeVersion release serves once enabled.
	b.WriteString("{{- else if not (.Capabilities.APIVersions.Has \"v1/Namespace\") -}}\n")
	for i, v := range k.Versions {
		gv := served.Group + "/" + v.Name
		switch {
		case i == len(k.Versions)-1:
			fmt.Fprintf(&b, "{{- else -}}\n%s\n", gv)
		case i == 0:
			fmt.Fprintf(&b, "{{- if semverCompare \">=1.%d-0\" .Capabilities.KubeVersion.Version -}}\n%s\n", v.Since, gv)
		default:
			fmt.Fprintf(&b, "{{- else if semverCompare \">=1.%d-0\" .Capabilities.KubeVersion.Version -}}\n%s\n", v.Since, gv)
		}
	}
	b.WriteString("{{- end -}}\n")
	msg := fmt.Sprintf("%s needs %s, which this cluster (Kubernetes %%s) does not serve: it is served by default from 1.%d; %s on kube-apiserver",
		registration.ProvenanceFeature(m), k.Name, k.Versions[0].Since, strings.Join(enable, "; "))
	fmt.Fprintf(&b, "{{- else -}}\n{{- fail (printf %q .Capabilities.KubeVersion.Version) -}}\n{{- end -}}\n{{- end -}}\n", msg)
	return b.String()
}

// finalizerPolicyIf opens the condition of the Finalize bindings' policies
// (registration.FinalizerStamps): the cluster serves the first version of
// MutatingAdmissionPolicy, which releases serve by default, or, without a
// cluster (helm template), the chart's release does.
func finalizerPolicyIf() string {
	k := served.MutatingAdmissionPolicy
	v := k.Versions[0]
	return fmt.Sprintf("{{- if or (.Capabilities.APIVersions.Has %q) (and (not (.Capabilities.APIVersions.Has \"v1/Namespace\")) (semverCompare \">=1.%d-0\" .Capabilities.KubeVersion.Version)) }}\n",
		served.Group+"/"+v.Name+"/"+k.Name, v.Since)
}
