package registration

import (
	"context"
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/vigilkit/vigil/admission"

	"github.com/vigilkit/vigil/internal/runtime/events"
)

// Register runs the protocol: fill with Ignore (a first install) or keep
// what was enforced (any later registration), prove reachability with the
// canary, enforce. It retries until done or ctx ends. A configuration already
// enforced by this version with these bindings, and still as specified, is
// left as it is; one that drifted is repaired (see Sync).
func (r *Registrar) Register(ctx context.Context) error {
	_, wrote, err := r.sync(ctx)
	if err == nil && !wrote {
		events.Info(r.opts.Log, events.WebhooksAlreadyRegistered, "webhooks already registered by this version", "module", r.opts.Module)
	}
	return err
}

// Sync keeps the module's configurations true to its spec: it reads both,
// and when they differ from what this version registers — the webhooks
// list, rules, selectors, failure policy, timeout, match conditions, the
// client configuration and its caBundle — or carry no record of this
// version's registration, it writes them again. It returns what it found
// wrong ("drift"), in words, or nothing when they were in sync or merely
// registered for the first time by this version (an empty configuration as
// the manifests ship it, or one an older version wrote).
//
// A repair is the registration protocol itself, one state machine kept in
// the Record: when reachability is in question (a client configuration or
// caBundle changed, a configuration emptied, a record lost or still
// probing) it proves with the canary that the API server reaches the
// module, then enforces — at failurePolicy Ignore meanwhile ("probing")
// only on a first install, otherwise with every webhook kept at its
// enforced policy on its proven client configuration ("proving"); when only
// what is matched or how it fails changed (rules, selectors, failure
// policy, timeout, a webhook removed) it enforces at once. Every write is
// compare-and-swap on the resourceVersion and never overwrites a newer
// version's configuration while that version runs (ErrNewer): during a
// rollout an older replica does not "repair" the newer one's registration;
// after a rollback, once the newer version's Lease lapsed, it does (see
// lease.go). A configuration deleted
// outright is ErrMissing and is not re-created.
func (r *Registrar) Sync(ctx context.Context) ([]string, error) {
	drift, _, err := r.sync(ctx)
	return drift, err
}

// sync is Sync, and says whether it wrote.
func (r *Registrar) sync(ctx context.Context) ([]string, bool, error) {
	h, err := r.build()
	if err != nil {
		return nil, false, err
	}
	enforce := r.policy()
	var drift []string
	probe, verify := false, false
	r.over = ""
	// known: the module enforced these configurations before — a record
	// says so, or this registrar did. Then nothing starts at Ignore again.
	known := r.enforced.Load()
	var actuals [2][]hookView
	var failedOpenNow [2][]string // webhooks failed open during an outage, not proven to serve yet
	for i, k := range kinds {
		_, rec, actual, err := r.read(ctx, k)
		if err != nil {
			return nil, false, err
		}
		actuals[i] = actual
		if newer(rec.Version, r.opts.Version) {
			if err := r.takeOver(ctx, k, rec.Version); err != nil {
				return nil, false, err
			}
		}
		switch rec.State {
		case StateEnforced, StateFailedOpen, StateProving:
			known = true
		}
		if rec.State == StateFailedOpen {
			failedOpenNow[i] = rec.FailedOpen
		}
		ours := rec.Version == r.opts.Version && rec.Hash == h.hash
		wanted := h.views(k, enforce, true)
		switch {
		case ours && rec.State == StateFailedOpen:
			// Failed open during an outage: the capabilities with a bound
			// are Ignore, the rest as enforced. Enforce them again once the
			// canary proves a replica serves, without weakening the rest.
			wanted = failedOpen(wanted, actual, r.failOpenNames())
			verify = true
		case !ours || rec.State != StateEnforced:
			wanted = h.views(k, admissionregistrationv1.Ignore, false)
			probe = true
		}
		diffs, reach := diffHooks(wanted, actual)
		probe = probe || reach
		where := fmt.Sprintf("%s webhook configuration %q", k, r.opts.Module)
		switch {
		case rec.IsZero():
			// No record: as the manifests ship it, or emptied or re-created
			// by a re-apply. Drift unless it is the first registration —
			// which the caller knows (Register ignores drift).
			if len(actual) == 0 {
				drift = append(drift, where+": "+Emptied)
			} else {
				drift = append(drift, strings.Join(append([]string{where + ": no registration record"}, diffs...), "; "))
			}
		case ours && len(diffs) > 0:
			drift = append(drift, where+": "+strings.Join(diffs, "; "))
		}
	}
	if !probe && !verify && len(drift) == 0 {
		return nil, false, nil // in sync: enforced by this version, as specified
	}
	if len(drift) > 0 && r.onDrift != nil {
		r.onDrift(drift)
	}
	r.repairing = nil
	if known && !FirstRegistration(drift) {
		r.repairing = drift
	}
	wrote, err := r.repair(ctx, h, enforce, known, probe, verify, actuals, failedOpenNow)
	r.repairing = nil
	return drift, wrote, err
}

// repair writes what sync found wanting, by the registration protocol: it
// proves reachability with the canary first when it is in question (probe;
// verify after an outage), keeping the webhooks enforced when the module
// enforced them before (known), then enforces. It says whether it wrote.
func (r *Registrar) repair(ctx context.Context, h *hooks, enforce admissionregistrationv1.FailurePolicyType, known, probe, verify bool, actuals [2][]hookView, failedOpenNow [2][]string) (bool, error) {
	if probe && known {
		// Enforced before: the webhooks stay enforced, on the client
		// configuration they have, while the new one is proven on the
		// canary alone, which admits nothing; then one write per
		// configuration switches them.
		proving := map[kind]webhooks{}
		for i, k := range kinds {
			proving[k] = h.proving(k, enforce, actuals[i], failedOpenNow[i])
		}
		if err := r.writeEach(ctx, func(k kind) webhooks { return proving[k] }, h.hash, StateProving); err != nil {
			return true, err
		}
		events.Info(r.opts.Log, events.WebhooksProving, "webhooks stay enforced; proving their new client configuration on the canary")
		if err := r.probe(ctx); err != nil {
			return true, err
		}
	} else if probe {
		// A first install: nothing was enforced, so nothing is weakened.
		if err := r.write(ctx, h, admissionregistrationv1.Ignore, StateProbing); err != nil {
			return true, err
		}
		events.Info(r.opts.Log, events.WebhooksRegistered, "webhooks registered with failurePolicy Ignore; probing reachability")
		if err := r.probe(ctx); err != nil {
			return true, err
		}
	} else if verify {
		if err := r.probe(ctx); err != nil {
			return false, err
		}
		events.Info(r.opts.Log, events.WebhooksReEnforced, "a replica serves again after an outage: enforcing the webhooks that failed open")
	}
	if err := r.write(ctx, h, enforce, StateEnforced); err != nil {
		return true, err
	}
	r.enforced.Store(true)
	events.Info(r.opts.Log, events.WebhooksEnforced, "webhooks enforced", "failurePolicy", string(enforce))
	return true, nil
}

// Emptied is Sync's word for a configuration without webhooks or a Record:
// as the manifests ship it, or emptied or re-created by a re-apply.
const Emptied = "emptied (no webhooks, no registration record)"

// FirstRegistration reports whether all of a drift is Emptied: what a first
// registration finds, which a replica that has not registered yet cannot
// tell from a re-apply.
func FirstRegistration(drift []string) bool {
	for _, d := range drift {
		if !strings.HasSuffix(d, ": "+Emptied) {
			return false
		}
	}
	return true
}

// policy is the failure policy the webhooks enforce once reachable.
func (r *Registrar) policy() admissionregistrationv1.FailurePolicyType {
	if r.opts.FailurePolicy == admission.Ignore {
		return admissionregistrationv1.Ignore
	}
	return admissionregistrationv1.Fail
}
