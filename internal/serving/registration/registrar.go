package registration

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/kubernetes"

	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/definition/spec"
)

// Options configure a Registrar.
type Options struct {
	Module    string
	Namespace string
	// Ignored are the namespaces the module ignores, kept out of every
	// webhook (spec.Module.IgnoredNamespaces).
	Ignored []string
	// Version of the module; a configuration written by a newer one is left
	// alone. "0.0.0" when empty.
	Version  string
	Bindings []spec.Binding
	// Gated objects are excluded from every webhook by match conditions
	// (spec.Module.Exclusions).
	Gated []spec.Exclusion
	// ClientConfig says how the API server reaches the module for a path; the
	// caBundle is filled in from CABundle.
	ClientConfig func(path string) admissionregistrationv1.WebhookClientConfig
	CABundle     func() []byte
	// FailurePolicy the webhooks get once the canary passed.
	FailurePolicy admission.FailurePolicy
	// Policies override FailurePolicy for the capabilities they name.
	Policies map[string]admission.FailurePolicy
	// TimeoutSeconds of the webhooks; 10 when zero.
	TimeoutSeconds int32
	// Mapper turns the bindings' kinds into resources.
	Mapper meta.RESTMapper
	Log    logr.Logger
	// OutageObserved, when set, is told after each outage check which
	// webhooks are failed open now and which this check failed open.
	OutageObserved func(failedOpen, changed []string)
	// LeaseDuration, when set, makes this version's admission replicas
	// renew a Lease (LeaseName) every third of it, and lets this version
	// take over a registration a newer version wrote once that version's
	// Lease has not been renewed for LeaseDuration (a rollback). Zero: no
	// Lease, and a newer version's registration is left alone for good.
	LeaseDuration time.Duration
	// Holder names this replica in the Lease (its Pod's name).
	Holder string
}

// Errors a caller may branch on.
var (
	// ErrMissing: the configuration is gone (an admin deleted it, or the
	// manifests were not applied); it is not recreated.
	ErrMissing = errors.New("webhook configuration missing")
	// ErrNewer: a newer version of the module registered; this one stands
	// aside.
	ErrNewer = errors.New("a newer module version registered")
)

// Registrar registers one module's webhooks.
type Registrar struct {
	c       kubernetes.Interface
	opts    Options
	onDrift func(drift []string)
	onStuck func(problem error)
	// enforced: this registrar enforced the configurations before, so an
	// emptied one is no first install (see sync).
	enforced atomic.Bool
	// over is the newer version whose registration this sync takes over:
	// its Lease expired.
	over string
	// repairing is the drift this sync repairs, recorded with the enforced
	// state it writes (Record.Repairs).
	repairing []string
}

// OnDrift sets what Sync tells about drift it found, before it repairs it.
// Set it before Sync runs.
func (r *Registrar) OnDrift(f func(drift []string)) { r.onDrift = f }

// New returns a Registrar.
func New(c kubernetes.Interface, opts Options) *Registrar {
	if opts.Version == "" {
		opts.Version = "0.0.0"
	}
	if opts.TimeoutSeconds == 0 {
		opts.TimeoutSeconds = 10
	}
	if opts.FailurePolicy == "" {
		opts.FailurePolicy = admission.Fail
	}
	return &Registrar{c: c, opts: opts}
}

// Newer returns the version that wrote the configurations when it is newer
// than this one — from its first write on, while it still probes — else "".
// The admission handler asks it about requests this version does not serve,
// which it allows only during such a rollout.
func (r *Registrar) Newer(ctx context.Context) (string, error) {
	recs, err := r.records(ctx)
	if err != nil {
		return "", err
	}
	found := ""
	for _, rec := range recs {
		if newer(rec.Version, r.opts.Version) && (found == "" || newer(rec.Version, found)) {
			found = rec.Version
		}
	}
	return found, nil
}

// Unregister empties the configurations, for uninstall.
func (r *Registrar) Unregister(ctx context.Context) error {
	for _, k := range kinds {
		body := map[string]any{"metadata": map[string]any{"annotations": map[string]any{Annotation: nil}}, "webhooks": []any{}}
		if err := r.patch(ctx, k, body); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// newer reports whether version a is newer than b.
func newer(a, b string) bool {
	if a == "" {
		return false
	}
	va, err1 := version.ParseGeneric(a)
	vb, err2 := version.ParseGeneric(b)
	if err1 != nil || err2 != nil {
		return false
	}
	return vb.LessThan(va)
}
