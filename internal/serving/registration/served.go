package registration

import (
	"errors"
	"fmt"

	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/runtime/served"
)

// ProvenanceFeature names the module's NamespaceProvenance, where it was
// declared, for the errors that refuse it.
func ProvenanceFeature(m *spec.Module) string {
	if m.Provenance == nil {
		return "NamespaceProvenance"
	}
	return fmt.Sprintf("vigil.NamespaceProvenance (declared at %s)", m.Provenance.Site)
}

// Unservable is the error for each kind the module's declarations need and
// the cluster does not serve, naming the feature, the cluster's version and
// what to enable; nil when the cluster serves them all. A module is never
// installed or run with a part of its policy missing.
func Unservable(m *spec.Module, cluster served.Cluster) error {
	var errs []error
	if m.Provenance != nil {
		errs = append(errs, cluster.Missing(ProvenanceFeature(m), served.MutatingAdmissionPolicy))
	}
	if guards := Policies(m); len(guards) > 0 {
		errs = append(errs, cluster.Missing(fmt.Sprintf("the module's %d API-server policies (opt-out guards, Require checks, trusted namespaces)", len(guards)), served.ValidatingAdmissionPolicy))
	}
	if m.HasAdmission() {
		errs = append(errs,
			cluster.Missing("the module's admission webhooks", served.MutatingWebhookConfiguration),
			cluster.Missing("the module's admission webhooks", served.ValidatingWebhookConfiguration))
	}
	return errors.Join(errs...)
}
