package dev

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/runtime/served"
	"github.com/vigilkit/vigil/internal/serving/registration"
)

// createTrust creates what the module's manifests install for its trusted
// namespaces and its namespace provenance, before the guards: the trusted
// namespaces that are missing (left in place when the session ends, with
// what they hold), and the provenance stamp, marked as vigil dev's. A stamp
// that exists without the mark is left as it is.
func createTrust(ctx context.Context, cs kubernetes.Interface, m *spec.Module, emit func(string)) error {
	if err := registration.EnsureTrustedNamespaces(ctx, cs, m, map[string]string{"app.kubernetes.io/name": m.Name, "app.kubernetes.io/managed-by": "vigil"}); err != nil {
		return err
	}
	stamps := registration.Stamps(m)
	if len(stamps) == 0 {
		return nil
	}
	cluster, err := served.Discover(ctx, cs.Discovery())
	if err != nil {
		return err
	}
	api, err := registration.NewStampAPI(cs, cluster, registration.ProvenanceFeature(m))
	if err != nil {
		return err
	}
	for _, s := range stamps {
		p, b := s.Policy, s.Binding
		mark(&p.ObjectMeta, m.Name)
		mark(&b.ObjectMeta, m.Name)
		keep := func(cur metav1.Object) bool {
			if marked(cur, m.Name) {
				return true
			}
			emit("MutatingAdmissionPolicy " + p.Name + " exists and is not vigil dev's: left as it is")
			return false
		}
		if err := api.Apply(ctx, p, b, fieldManager, keep); err != nil {
			return err
		}
	}
	return nil
}
