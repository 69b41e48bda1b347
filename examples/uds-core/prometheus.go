package main

import (
	"context"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/admission"
)

// declarePrometheus declares the validation of UDS Core's prometheus
// capability (its src/pepr/prometheus): a Probe may use a Blackbox Exporter
// SSO module (http_200x_sso_<namespace>_<clientId>) only of its own
// namespace. Probes are the Prometheus Operator's (monitoring.coreos.com),
// which a cluster may not run: the binding is registered while the kind is
// served, and holds nothing back meanwhile.
func declarePrometheus(m *vigil.Module) {
	vigil.When(m.Capability("prometheus"), vigil.Kind("monitoring.coreos.com", "v1", "Probe")).IsCreatedOrUpdated().IfServed().Named("probe-validator").
		Validate(func(_ context.Context, r *vigil.Request[*unstructured.Unstructured]) vigil.Verdict {
			if msg := validateProbe(r.Object); msg != "" {
				return admission.Deny(msg)
			}
			return admission.Allow()
		})
}

// validateProbe is UDS Core's probeValidator: the denial of a Probe that
// names another namespace's SSO module, or "".
func validateProbe(u *unstructured.Unstructured) string {
	module, _, _ := unstructured.NestedString(u.Object, "spec", "module")
	if strings.HasPrefix(module, "http_200x_sso") && !strings.HasPrefix(module, "http_200x_sso_"+u.GetNamespace()+"_") {
		return "Probe is not authorized to use this Blackbox Exporter module"
	}
	return ""
}
