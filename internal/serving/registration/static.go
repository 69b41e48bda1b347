package registration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/vigilkit/vigil/internal/definition/spec"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	mut, val := Bootstrap(spec.StaticName(r.opts.Module))
	fail := func(name string) *admissionregistrationv1.FailurePolicyType {
		if p, ok := h.nsPolicies[name]; ok {
			return ptr.To(p)
		}
		return ptr.To(admissionregistrationv1.Fail)
	}
	mws, vws := slices.Clone(h.mutating), slices.Clone(h.validating)
	setPolicies(mws, fail)
	setPolicies(vws, fail)
	mut.Webhooks, val.Webhooks = mws, vws
	return mut, val, nil
}

// StaticRule is the RBAC rule a module with fail-closed capabilities needs to
// keep the caBundle of their configurations current: get and patch on exactly
// those two.
func StaticRule(module string) rbacv1.PolicyRule {
	r := Rule(module)
	r.ResourceNames = []string{spec.StaticName(module)}
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
	name := spec.StaticName(r.opts.Module)
	for _, k := range kinds {
		_, ws, err := k.get(ctx, r.c, name)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return err
		}
		var ops []map[string]any
		for j := range ws.Len() {
			h := ws.at(j)
			if bytes.Equal(h.clientConfig.CABundle, ca) {
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
		if err := k.patch(ctx, r.c, name, types.JSONPatchType, data); err != nil {
			return fmt.Errorf("put the serving CA into %s: %w", name, err)
		}
	}
	return nil
}

// Enforced returns the webhook configurations of the capabilities registered
// when ready as the module writes them once the canary passed: each webhook
// at its enforced failure policy (the canary stays Ignore). With Static, it
// is what the API server calls once the module serves.
func (r *Registrar) Enforced() (*admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	h, err := r.build()
	if err != nil {
		return nil, nil, err
	}
	mut, val := Bootstrap(r.opts.Module)
	mut.Webhooks = []admissionregistrationv1.MutatingWebhook(h.withPolicy(mutatingKind{}, r.policy(), true).(mutatingHooks))
	val.Webhooks = []admissionregistrationv1.ValidatingWebhook(h.withPolicy(validatingKind{}, r.policy(), true).(validatingHooks))
	return mut, val, nil
}
