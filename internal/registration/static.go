package registration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// Static returns the webhook configurations of the module's fail-closed
// capabilities, as its manifests ship them: named <module>-fail-closed,
// failurePolicy Fail from the start, never written by the module.
func (r *Registrar) Static() (*admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	h, err := r.hooksFor(true)
	if err != nil {
		return nil, nil, err
	}
	mut, val := Bootstrap(StaticName(r.opts.Module))
	for _, w := range h.mutating {
		w.FailurePolicy = ptr.To(admissionregistrationv1.Fail)
		mut.Webhooks = append(mut.Webhooks, w)
	}
	for _, w := range h.validating {
		w.FailurePolicy = ptr.To(admissionregistrationv1.Fail)
		val.Webhooks = append(val.Webhooks, w)
	}
	return mut, val, nil
}

// StaticName names the configurations of a module's fail-closed
// capabilities.
func StaticName(module string) string { return module + "-fail-closed" }

// StaticRule is the RBAC rule a module with fail-closed capabilities needs to
// keep the caBundle of their configurations current: get and patch on exactly
// those two.
func StaticRule(module string) rbacv1.PolicyRule {
	r := Rule(module)
	r.ResourceNames = []string{StaticName(module)}
	return r
}

// InjectCABundle puts the serving CA into every webhook of the fail-closed
// configurations that lacks it or carries an older one, as the manifests
// ship them without one when the CA is made at run time. Missing
// configurations are no error: the module may have none.
func (r *Registrar) InjectCABundle(ctx context.Context) error {
	failClosed := false
	for _, b := range r.opts.Bindings {
		failClosed = failClosed || b.FailClosed
	}
	ca := r.opts.CABundle()
	if !failClosed || len(ca) == 0 {
		return nil // nothing to fill, and no right to look: see StaticRule
	}
	name := StaticName(r.opts.Module)
	type hook struct {
		name string
		ca   []byte
	}
	var sets [2][]hook
	if mut, err := r.c.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{}); err == nil {
		for _, w := range mut.Webhooks {
			sets[0] = append(sets[0], hook{w.Name, w.ClientConfig.CABundle})
		}
	} else if !apierrors.IsNotFound(err) {
		return err
	}
	if val, err := r.c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{}); err == nil {
		for _, w := range val.Webhooks {
			sets[1] = append(sets[1], hook{w.Name, w.ClientConfig.CABundle})
		}
	} else if !apierrors.IsNotFound(err) {
		return err
	}
	for i, hooks := range sets {
		var ops []map[string]any
		for j, h := range hooks {
			if bytes.Equal(h.ca, ca) {
				continue
			}
			// The test pins the index to the webhook's name, so a concurrent
			// change of the list fails the patch instead of misplacing it.
			ops = append(ops,
				map[string]any{"op": "test", "path": fmt.Sprintf("/webhooks/%d/name", j), "value": h.name},
				map[string]any{"op": "add", "path": fmt.Sprintf("/webhooks/%d/clientConfig/caBundle", j), "value": ca})
		}
		if len(ops) == 0 {
			continue
		}
		data, err := json.Marshal(ops)
		if err != nil {
			return err
		}
		if i == 0 {
			_, err = r.c.AdmissionregistrationV1().MutatingWebhookConfigurations().Patch(ctx, name, types.JSONPatchType, data, metav1.PatchOptions{FieldManager: "vigil"})
		} else {
			_, err = r.c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Patch(ctx, name, types.JSONPatchType, data, metav1.PatchOptions{FieldManager: "vigil"})
		}
		if err != nil {
			return fmt.Errorf("put the serving CA into %s: %w", name, err)
		}
	}
	return nil
}
