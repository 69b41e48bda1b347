package registration

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/vigilkit/vigil/internal/definition/spec"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
)

// records reads both configurations' annotations.
func (r *Registrar) records(ctx context.Context) ([2]Record, error) {
	var out [2]Record
	for i, k := range kinds {
		_, rec, err := r.get(ctx, k)
		if err != nil {
			return out, err
		}
		out[i] = rec
	}
	return out, nil
}

func (r *Registrar) get(ctx context.Context, k kind) (string, Record, error) {
	rv, rec, _, err := r.read(ctx, k)
	return rv, rec, err
}

// read gets one configuration: its resourceVersion, its Record and its
// webhooks as Sync compares them.
func (r *Registrar) read(ctx context.Context, k kind) (string, Record, []hookView, error) {
	m, ws, err := k.get(ctx, r.c, spec.ConfigurationName(r.opts.Module))
	if apierrors.IsNotFound(err) {
		return "", Record{}, nil, fmt.Errorf("%w: %s webhook configuration %q: apply the module's manifests, which ship it empty", ErrMissing, k, r.opts.Module)
	}
	if err != nil {
		return "", Record{}, nil, r.explain("get", k, err)
	}
	return m.GetResourceVersion(), recordOf(m), ws.views(), nil
}

// write patches both configurations, each with a resourceVersion
// precondition, unless a newer version of the module wrote them.
func (r *Registrar) write(ctx context.Context, h *hooks, policy admissionregistrationv1.FailurePolicyType, state string) error {
	return r.writeEach(ctx, func(k kind) webhooks { return h.withPolicy(k, policy, state == StateEnforced) }, h.hash, state)
}

// writeEach patches each configuration with its webhooks, as write does.
func (r *Registrar) writeEach(ctx context.Context, webhooksOf func(kind) webhooks, hash, state string) error {
	for _, k := range kinds {
		if err := r.writeOne(ctx, k, webhooksOf(k), hash, state); err != nil {
			return err
		}
	}
	return nil
}

func (r *Registrar) writeOne(ctx context.Context, k kind, webhooks webhooks, hash, state string) error {
	// On a conflict someone else wrote: read again and decide again.
	return retry.RetryOnConflict(conflictBackoff, func() error {
		rv, rec, err := r.get(ctx, k)
		if err != nil {
			return err
		}
		if newer(rec.Version, r.opts.Version) && rec.Version != r.over {
			r.opts.Log.Info("a newer module version registered the webhooks; leaving them", "kind", k.String(), "theirs", rec.Version, "ours", r.opts.Version)
			return fmt.Errorf("%w: %s webhooks are version %s's, this is %s", ErrNewer, k, rec.Version, r.opts.Version)
		}
		next := Record{Version: r.opts.Version, Hash: hash, Generation: rec.Generation + 1, State: state, Outages: rec.Outages, Repairs: rec.Repairs}
		if state == StateEnforced {
			next.Repairs = addRepairs(next.Repairs, k, r.repairing)
		}
		if rec.Version == next.Version && rec.Hash == hash {
			next.Enforced = rec.Enforced
		}
		if rec.State == StateFailedOpen && rec.FailedOpenSince != "" {
			// The webhooks that failed open enforce again (or are probed):
			// the outage window closes, for the audit to report.
			next.Outages = closeOutage(next.Outages, Outage{From: rec.FailedOpenSince, To: time.Now().UTC().Format(time.RFC3339), Webhooks: rec.FailedOpen})
		}
		if state == StateEnforced && next.Enforced == "" {
			next.Enforced = time.Now().UTC().Format(time.RFC3339)
		}
		ann, _ := json.Marshal(next)
		body := map[string]any{
			"metadata": map[string]any{"resourceVersion": rv, "annotations": map[string]any{Annotation: string(ann)}},
			"webhooks": webhooks,
		}
		return r.patch(ctx, k, body)
	})
}

// conflictBackoff paces the retries of a write that lost a
// compare-and-swap to another writer.
var conflictBackoff = wait.Backoff{Duration: 20 * time.Millisecond, Factor: 2, Jitter: 0.5, Steps: 10, Cap: time.Second}

func (r *Registrar) patch(ctx context.Context, k kind, body map[string]any) error {
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	err = k.patch(ctx, r.c, spec.ConfigurationName(r.opts.Module), types.MergePatchType, data)
	if err != nil && !apierrors.IsConflict(err) {
		return r.explain("patch", k, err)
	}
	return err
}

func (r *Registrar) explain(verb string, k kind, err error) error {
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("%s the %s webhook configuration %q: %w: the module needs the rule {apiGroups: [admissionregistration.k8s.io], resources: [mutatingwebhookconfigurations, validatingwebhookconfigurations], verbs: [get, patch], resourceNames: [%s]}", verb, k, r.opts.Module, err, r.opts.Module)
	}
	return fmt.Errorf("%s the %s webhook configuration %q: %w", verb, k, r.opts.Module, err)
}
