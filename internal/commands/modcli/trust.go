package modcli

import (
	"fmt"
	"io"
	"strings"

	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/serving/registration"
	"github.com/vigilkit/vigil/provenance"
)

// writeTrust prints the trusted namespaces and the namespace provenance:
// what the install creates and ships for them, and who may change them.
func writeTrust(out io.Writer, m *spec.Module) {
	if len(m.TrustedNamespaces) > 0 {
		fmt.Fprintln(out, "\ntrusted namespaces (created by the install; held by the API server, failurePolicy Fail, whether the module runs or not):")
		for _, t := range m.TrustedNamespaces {
			fmt.Fprintf(out, "  %s (%s): Namespace %s; only %s may create or delete it, or change its labels or annotations (ValidatingAdmissionPolicy %s; the chart's trusted.allowed adds the installer)\n",
				t.Name, t.Site, t.Name, strings.Join(registration.TrustedAllowed(t.Allowed), ", "), registration.TrustedGuardName(m.Name, t.Name))
		}
	}
	if p := m.Provenance; p != nil {
		fmt.Fprintf(out, "\nnamespace provenance (%s): every Namespace created gets the annotations %s and %s, its creator's username and groups (a JSON list), over what the creator wrote (MutatingAdmissionPolicy %s, Kubernetes 1.36 or later); only %s may change or remove them, or vouch for a namespace with %s (ValidatingAdmissionPolicy %s); a namespace created before the stamp's policy has an unknown creator until vouched for\n",
			p.Site, provenance.CreatedBy, provenance.CreatedByGroups, registration.ProvenanceStampName(m.Name), strings.Join(registration.TrustedAllowed(p.Allowed), ", "), provenance.VouchedUnder, registration.ProvenanceGuardName(m.Name))
	}
}
