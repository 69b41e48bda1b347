package registration

import (
	"context"
	"encoding/json"
	"slices"
	"sort"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/runtime/events"
)

// failOpenBounds are the webhooks of the capabilities that declared an
// outage bound (spec.FailOpen), with their bounds. Fail-closed capabilities
// never have one (a definition mistake), and are skipped regardless.
func (r *Registrar) failOpenBounds() map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, b := range r.opts.Bindings {
		if b.FailOpenAfter > 0 && !b.FailClosed {
			out[spec.WebhookName(r.opts.Module, b.Capability, b.Action)] = b.FailOpenAfter
		}
	}
	return out
}

func (r *Registrar) failOpenNames() []string {
	var names []string
	for n := range r.failOpenBounds() {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// failedOpen is what Sync expects of a configuration the watcher failed
// open: the webhooks of the capabilities with a bound as they are (Ignore,
// or still enforced when their bound has not run out), the rest as wanted.
func failedOpen(wanted, actual []hookView, names []string) []hookView {
	out := slices.Clone(wanted)
	for i, w := range out {
		if !slices.Contains(names, w.name) {
			continue
		}
		for _, a := range actual {
			if a.name == w.name && (a.failurePolicy == admissionregistrationv1.Ignore || a.failurePolicy == w.failurePolicy) {
				out[i].failurePolicy = a.failurePolicy
			}
		}
	}
	return out
}

// FailOpen sets the named webhooks (only those of capabilities with an
// outage bound) to failurePolicy Ignore in the module's configurations and
// records the state "failed-open", with a resourceVersion precondition on
// each write, as the registrar writes. It touches configurations that are
// "enforced" or already "failed-open" only: probing ones are Ignore already,
// and a newer version's are left to it. It returns the webhooks it changed.
func (r *Registrar) FailOpen(ctx context.Context, names []string) ([]string, error) {
	allowed := r.failOpenBounds()
	var changed []string
	for _, k := range kinds {
		var done []string
		// On a conflict the registrar wrote meanwhile: read again and
		// decide again.
		err := retry.RetryOnConflict(conflictBackoff, func() error {
			var err error
			done, err = r.failOpenOne(ctx, k, names, allowed)
			return err
		})
		if err != nil {
			return changed, err
		}
		changed = append(changed, done...)
	}
	return changed, nil
}

func (r *Registrar) failOpenOne(ctx context.Context, k kind, names []string, allowed map[string]time.Duration) ([]string, error) {
	m, webhooks, err := k.get(ctx, r.c, spec.ConfigurationName(r.opts.Module))
	if err != nil {
		return nil, r.explain("get", k, err)
	}
	var changed []string
	for i := range webhooks.Len() {
		w := webhooks.at(i)
		if _, ok := allowed[w.name]; !ok || !slices.Contains(names, w.name) || ptr.Deref(*w.failurePolicy, admissionregistrationv1.Fail) == admissionregistrationv1.Ignore {
			continue
		}
		*w.failurePolicy = ptr.To(admissionregistrationv1.Ignore)
		changed = append(changed, w.name)
	}
	rec := recordOf(m)
	if len(changed) == 0 || newer(rec.Version, r.opts.Version) || (rec.State != StateEnforced && rec.State != StateFailedOpen) {
		return nil, nil
	}
	if rec.State != StateFailedOpen || rec.FailedOpenSince == "" {
		rec.FailedOpenSince, rec.FailedOpen = time.Now().UTC().Format(time.RFC3339), nil
	}
	for _, n := range changed {
		if !slices.Contains(rec.FailedOpen, n) {
			rec.FailedOpen = append(rec.FailedOpen, n)
		}
	}
	sort.Strings(rec.FailedOpen)
	rec.State, rec.Generation = StateFailedOpen, rec.Generation+1
	ann, _ := json.Marshal(rec)
	body := map[string]any{
		"metadata": map[string]any{"resourceVersion": m.GetResourceVersion(), "annotations": map[string]any{Annotation: string(ann)}},
		"webhooks": webhooks,
	}
	if err := r.patch(ctx, k, body); err != nil {
		return nil, err
	}
	return changed, nil
}

// closeOutage appends a closed window, keeping the last MaxOutages.
func closeOutage(outages []Outage, o Outage) []Outage {
	outages = append(slices.Clone(outages), o)
	if len(outages) > MaxOutages {
		outages = outages[len(outages)-MaxOutages:]
	}
	return outages
}

// WatchOutages runs, on the watcher's leader, while the module has
// capabilities with an outage bound: every interval, while its
// configurations enforce, it asks by the canary whether the API server
// reaches an admission replica. Once none has served for a capability's
// bound it fails that capability's webhooks open (FailOpen); the first
// replica that serves again enforces them once more (its Sync). The bound is
// counted from the first check that found no replica, so a watcher that
// starts during an outage waits the whole bound again. It returns when ctx
// ends.
func (r *Registrar) WatchOutages(ctx context.Context, interval time.Duration) error {
	bounds := r.failOpenBounds()
	if len(bounds) == 0 {
		<-ctx.Done()
		return nil
	}
	var down time.Time // zero while a replica serves
	for {
		var changed []string
		recs, err := r.records(ctx)
		if err != nil {
			r.opts.Log.Error(err, "outage check: reading the webhook configurations")
		} else if !enforcing(recs) {
			down = time.Time{} // nothing enforced: unregistered, or the registrar is probing
		} else if ok, err := r.reached(ctx); err != nil {
			if ctx.Err() == nil {
				r.opts.Log.Error(err, "outage check: the canary's dry run went unanswered")
			}
		} else if ok {
			down = time.Time{}
		} else {
			if down.IsZero() {
				down = time.Now()
				events.Info(r.opts.Log, events.AdmissionOutage, "no admission replica serves; capabilities with an outage bound fail open once it runs out", "since", down.UTC().Format(time.RFC3339Nano))
			}
			var due []string
			for name, d := range bounds {
				if time.Since(down) >= d {
					due = append(due, name)
				}
			}
			if len(due) > 0 {
				sort.Strings(due)
				var err error
				changed, err = r.FailOpen(ctx, due)
				if len(changed) > 0 {
					events.Info(r.opts.Log, events.WebhooksFailedOpen, "no admission replica served within the bound: webhooks set to failurePolicy Ignore until one serves again", "webhooks", changed, "outage", time.Since(down).Round(time.Millisecond).String())
				}
				if err != nil && ctx.Err() == nil {
					r.opts.Log.Error(err, "outage check: failing open")
				}
			}
		}
		if r.opts.OutageObserved != nil && err == nil {
			failed := slices.Clone(changed)
			for _, rec := range recs {
				if rec.State == StateFailedOpen {
					failed = append(failed, rec.FailedOpen...)
				}
			}
			sort.Strings(failed)
			r.opts.OutageObserved(slices.Compact(failed), changed)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
	}
}

// enforcing reports whether a configuration enforces (or failed open from
// enforcing): only then can an outage shut anything out.
func enforcing(recs [2]Record) bool {
	for _, rec := range recs {
		if rec.State == StateEnforced || rec.State == StateFailedOpen {
			return true
		}
	}
	return false
}
