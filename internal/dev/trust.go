package dev

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/vigilkit/vigil/internal/registration"
	"github.com/vigilkit/vigil/internal/spec"
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
	api := cs.AdmissionregistrationV1()
	create := metav1.CreateOptions{FieldManager: fieldManager}
	for _, s := range registration.Stamps(m) {
		p, b := s.Policy, s.Binding
		mark(&p.ObjectMeta, m.Name)
		mark(&b.ObjectMeta, m.Name)
		if cur, err := api.MutatingAdmissionPolicies().Get(ctx, p.Name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			if _, err := api.MutatingAdmissionPolicies().Create(ctx, p, create); err != nil {
				return fmt.Errorf("create MutatingAdmissionPolicy %s: %w", p.Name, err)
			}
		} else if err != nil {
			return fmt.Errorf("get MutatingAdmissionPolicy %s: %w", p.Name, err)
		} else if !marked(cur, m.Name) {
			emit("MutatingAdmissionPolicy " + p.Name + " exists and is not vigil dev's: left as it is")
			continue
		} else {
			p.ResourceVersion = cur.ResourceVersion
			if _, err := api.MutatingAdmissionPolicies().Update(ctx, p, metav1.UpdateOptions{FieldManager: fieldManager}); err != nil {
				return fmt.Errorf("update MutatingAdmissionPolicy %s: %w", p.Name, err)
			}
		}
		if _, err := api.MutatingAdmissionPolicyBindings().Create(ctx, b, create); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create MutatingAdmissionPolicyBinding %s: %w", b.Name, err)
		}
	}
	return nil
}
