package registration

import (
	"context"
	"fmt"
	"time"

	"github.com/vigilkit/vigil/internal/definition/spec"

	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/vigilkit/vigil/internal/runtime/events"
)

// A version's admission replicas say they run by renewing a Lease of their
// own version in the module's namespace, named by LeaseName, every third of
// Options.LeaseDuration. An older version that finds the configurations
// written by a newer one (a rollback: helm rollback 1.0.1 → 1.0.0) stands
// aside while that version's Lease is renewed, and takes the registration
// over — writing its own, which repairs whatever drifted — once it has not
// been renewed for its leaseDurationSeconds: no replica of the newer
// version runs. Replicas renew only while ready, and first before they
// register, so a registration is never without a live Lease.

// DefaultLeaseDuration is the admission role's Options.LeaseDuration: an
// older version takes over within it plus CheckInterval after the last
// replica of the newer one stopped.
const DefaultLeaseDuration = 15 * time.Second

// LeaseRules are the RBAC rules of the admission role's Lease: get on the
// Leases of the module's namespace (an older version reads a newer one's,
// whose name it cannot know in advance; a Lease holds nothing secret),
// update on its own version's only, and create (which RBAC cannot narrow
// by name).
func LeaseRules(module, version string) []rbacv1.PolicyRule {
	if version == "" {
		version = "0.0.0"
	}
	g, res := []string{coordinationv1.GroupName}, []string{"leases"}
	return []rbacv1.PolicyRule{
		{APIGroups: g, Resources: res, Verbs: []string{"get"}},
		{APIGroups: g, Resources: res, Verbs: []string{"update"}, ResourceNames: []string{spec.LeaseName(module, version)}},
		{APIGroups: g, Resources: res, Verbs: []string{"create"}},
	}
}

// SetLease sets Options.LeaseDuration and Options.Holder. Call it before
// Sync or Heartbeat run.
func (r *Registrar) SetLease(d time.Duration, holder string) {
	r.opts.LeaseDuration, r.opts.Holder = d, holder
}

// RenewLease renews this version's Lease once, creating it when missing.
// Nothing when Options.LeaseDuration is zero.
func (r *Registrar) RenewLease(ctx context.Context) error {
	if r.opts.LeaseDuration <= 0 {
		return nil
	}
	leases := r.c.CoordinationV1().Leases(r.opts.Namespace)
	name := spec.LeaseName(r.opts.Module, r.opts.Version)
	now := metav1.NewMicroTime(time.Now())
	secs := ptr.To(int32((r.opts.LeaseDuration + time.Second - 1) / time.Second))
	holder := r.opts.Holder
	if holder == "" {
		holder = r.opts.Module + "@" + r.opts.Version
	}
	l, err := leases.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.opts.Namespace, Labels: map[string]string{
				"app.kubernetes.io/name": r.opts.Module, "app.kubernetes.io/managed-by": "vigil", "app.kubernetes.io/version": r.opts.Version,
			}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: secs, AcquireTime: &now, RenewTime: &now},
		}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil // another replica of this version made it just now
		}
	} else if err == nil {
		l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.RenewTime = &holder, secs, &now
		_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return nil // another replica of this version renewed it just now
		}
	}
	if err != nil {
		return fmt.Errorf("renew the admission Lease %s/%s: %w: the admission role needs get on leases (coordination.k8s.io) in %s, update on %s and create", r.opts.Namespace, name, err, r.opts.Namespace, name)
	}
	return nil
}

// Heartbeat renews this version's Lease every third of
// Options.LeaseDuration while ready passes, until ctx ends.
func (r *Registrar) Heartbeat(ctx context.Context, ready func() error) {
	if r.opts.LeaseDuration <= 0 {
		return
	}
	t := time.NewTicker(r.opts.LeaseDuration / 3)
	defer t.Stop()
	for {
		if ready() == nil {
			if err := r.RenewLease(ctx); err != nil && ctx.Err() == nil {
				r.opts.Log.Error(err, "admission Lease")
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// versionRuns reports whether a replica of the given version renewed its
// Lease within its duration, and when it lapsed if not.
func (r *Registrar) versionRuns(ctx context.Context, version string) (bool, time.Time, error) {
	l, err := r.c.CoordinationV1().Leases(r.opts.Namespace).Get(ctx, spec.LeaseName(r.opts.Module, version), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, time.Time{}, nil
	}
	if err != nil {
		return false, time.Time{}, err
	}
	renewed := l.Spec.RenewTime
	if renewed == nil {
		renewed = l.Spec.AcquireTime
	}
	if renewed == nil {
		return false, time.Time{}, nil
	}
	until := renewed.Add(time.Duration(ptr.Deref(l.Spec.LeaseDurationSeconds, 0)) * time.Second)
	return time.Now().Before(until), until, nil
}

// takeOver decides, for a configuration a newer version wrote, whether
// this version stands aside (ErrNewer: a replica of it runs, or this
// version does not take over) or registers over it (sets r.over).
func (r *Registrar) takeOver(ctx context.Context, k kind, theirs string) error {
	aside := fmt.Errorf("%w: %s webhooks are version %s's, this is %s", ErrNewer, k, theirs, r.opts.Version)
	if r.opts.LeaseDuration <= 0 || theirs == r.over {
		if theirs == r.over {
			return nil
		}
		return aside
	}
	runs, lapsed, err := r.versionRuns(ctx, theirs)
	if err != nil {
		return fmt.Errorf("%w; whether it still runs is unknown: read its Lease %s: %v", aside, spec.LeaseName(r.opts.Module, theirs), err)
	}
	if runs {
		return fmt.Errorf("%w, whose replicas renew their Lease %s", aside, spec.LeaseName(r.opts.Module, theirs))
	}
	r.over = theirs
	when := "never renewed"
	if !lapsed.IsZero() {
		when = lapsed.UTC().Format(time.RFC3339)
	}
	events.Info(r.opts.Log, events.RegistrationTakenOver, "a newer version registered the webhooks but none of its replicas runs (its Lease lapsed): this version registers again", "theirs", theirs, "ours", r.opts.Version, "expired", when)
	return nil
}
