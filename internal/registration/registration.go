package registration

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/admit"
	"github.com/vigilkit/vigil/internal/spec"

	"github.com/vigilkit/vigil/internal/events"
)

// Annotation carries what wrote a configuration: see Record.
const Annotation = "vigil.dev/registration"

// CanaryLabel marks the canary ConfigMap a module dry-runs to prove the API
// server reaches it.
const CanaryLabel = "vigil.dev/canary"

// Record is the annotation a registration writes.
type Record struct {
	Version    string `json:"version"`
	Hash       string `json:"hash"`
	Generation int64  `json:"generation"`
	// State is "probing" (a first install: failurePolicy Ignore until the
	// canary passes), "proving" (the webhooks stay enforced, on the client
	// configuration they had, while the new one is proven on the canary
	// alone), "enforced", or "failed-open" (the watcher set the webhooks of
	// the capabilities with an outage bound to Ignore while no replica
	// served: see FailOpen).
	State string `json:"state"`
	// Problem says why the registration cannot finish, since ProblemSince
	// (RFC 3339, UTC): the canary refused by another admission control
	// before it reached the module, or unanswered. Cleared once it
	// enforces.
	Problem      string `json:"problem,omitempty"`
	ProblemSince string `json:"problemSince,omitempty"`
	// Enforced is when this version of the module, with this spec (Hash),
	// first enforced its webhooks (RFC 3339, UTC); empty before. The audit
	// tells objects admitted before it from those admitted after.
	Enforced string `json:"enforced,omitempty"`
	// FailedOpen names the webhooks the watcher failed open, since
	// FailedOpenSince (RFC 3339, UTC); set while State is "failed-open".
	FailedOpen      []string `json:"failedOpen,omitempty"`
	FailedOpenSince string   `json:"failedOpenSince,omitempty"`
	// Outages are the last MaxOutages windows in which webhooks were failed
	// open and enforced again, oldest first, kept across versions: the audit
	// reports what got in during each.
	Outages []Outage `json:"outages,omitempty"`
}

// Outage is a window in which webhooks were failed open (failurePolicy
// Ignore while no admission replica served). To is "" while it lasts.
type Outage struct {
	From     string   `json:"from"`
	To       string   `json:"to,omitempty"`
	Webhooks []string `json:"webhooks"`
}

// MaxOutages bounds a Record's Outages.
const MaxOutages = 20

// IsZero reports whether the Record is missing: a configuration as the
// manifests ship it, or re-created or emptied by a re-apply.
func (r Record) IsZero() bool {
	return r.Version == "" && r.Hash == "" && r.Generation == 0 && r.State == "" && r.Enforced == "" &&
		len(r.FailedOpen) == 0 && r.FailedOpenSince == "" && len(r.Outages) == 0
}

// Windows are the Record's outages, the one still open (To "") included.
func (r Record) Windows() []Outage {
	out := slices.Clone(r.Outages)
	if r.State == StateFailedOpen && r.FailedOpenSince != "" {
		out = append(out, Outage{From: r.FailedOpenSince, Webhooks: slices.Clone(r.FailedOpen)})
	}
	return out
}

// Covers reports whether the window covers t for the named webhook; an open
// window lasts until now.
func (o Outage) Covers(webhook string, t time.Time) bool {
	if !slices.Contains(o.Webhooks, webhook) {
		return false
	}
	from, err := time.Parse(time.RFC3339, o.From)
	if err != nil {
		return false
	}
	to := time.Now()
	if o.To != "" {
		if to, err = time.Parse(time.RFC3339, o.To); err != nil {
			return false
		}
	}
	// creationTimestamp has second precision: the second the window opened
	// and the one it closed count as inside.
	return !t.Before(from.Truncate(time.Second)) && !t.After(to.Truncate(time.Second).Add(time.Second))
}

// EnforcedAt is Enforced as a time; zero when not enforced yet.
func (r Record) EnforcedAt() time.Time {
	t, _ := time.Parse(time.RFC3339, r.Enforced)
	return t
}

// ReadRecord reads the Record of the module's validating webhook
// configuration: what registered it, and since when it enforces. A
// configuration without one gives a zero Record.
func ReadRecord(ctx context.Context, c kubernetes.Interface, module string) (Record, error) {
	cfg, err := c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, module, metav1.GetOptions{})
	if err != nil {
		return Record{}, err
	}
	return recordOf(cfg), nil
}

// ReadMutatingRecord reads the Record of the module's mutating webhook
// configuration, whose outage windows say when its mutations did not run.
func ReadMutatingRecord(ctx context.Context, c kubernetes.Interface, module string) (Record, error) {
	cfg, err := c.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, module, metav1.GetOptions{})
	if err != nil {
		return Record{}, err
	}
	return recordOf(cfg), nil
}

func recordOf(cfg metav1.Object) Record {
	var rec Record
	if raw := cfg.GetAnnotations()[Annotation]; raw != "" {
		_ = json.Unmarshal([]byte(raw), &rec)
	}
	return rec
}

// The states of a Record.
const (
	StateProbing    = "probing"
	StateProving    = "proving"
	StateEnforced   = "enforced"
	StateFailedOpen = "failed-open"
)

// Bootstrap returns the module's two webhook configurations as its manifests
// ship them: empty, named after the module.
func Bootstrap(module string) (*admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.ValidatingWebhookConfiguration) {
	meta := metav1.ObjectMeta{Name: module, Labels: map[string]string{"app.kubernetes.io/name": module, "app.kubernetes.io/managed-by": "vigil"}}
	return &admissionregistrationv1.MutatingWebhookConfiguration{
			TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "MutatingWebhookConfiguration"},
			ObjectMeta: meta,
		}, &admissionregistrationv1.ValidatingWebhookConfiguration{
			TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration"},
			ObjectMeta: *meta.DeepCopy(),
		}
}

// Rule is the RBAC rule registration needs: get and patch on exactly the
// module's two configurations — never create, so the module cannot register
// anything else.
func Rule(module string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{
		APIGroups:     []string{admissionregistrationv1.GroupName},
		Resources:     []string{"mutatingwebhookconfigurations", "validatingwebhookconfigurations"},
		Verbs:         []string{"get", "patch"},
		ResourceNames: []string{module},
	}
}

// CanaryRule is the namespaced rule the reachability canary needs in the
// module's own namespace: create on ConfigMaps, used only with dryRun=All, so
// nothing is ever written. (create cannot be narrowed by resourceNames.)
func CanaryRule() rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create"}}
}

// Options configure a Registrar.
type Options struct {
	Module    string
	Namespace string
	// Version of the module; a configuration written by a newer one is left
	// alone. "0.0.0" when empty.
	Version  string
	Bindings []spec.Binding
	// Gated objects are excluded from every webhook by match conditions
	// (spec.Module.Exclusions).
	Gated []spec.Exclusion
	// ExcludeNamespaces besides those ExcludedNamespaces always names.
	ExcludeNamespaces []string
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
	for i, kind := range kinds {
		_, rec, actual, err := r.read(ctx, kind)
		if err != nil {
			return nil, false, err
		}
		actuals[i] = actual
		if newer(rec.Version, r.opts.Version) {
			if err := r.takeOver(ctx, kind, rec.Version); err != nil {
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
		wanted := h.views(kind, enforce, true)
		switch {
		case ours && rec.State == StateFailedOpen:
			// Failed open during an outage: the capabilities with a bound
			// are Ignore, the rest as enforced. Enforce them again once the
			// canary proves a replica serves, without weakening the rest.
			wanted = failedOpen(wanted, actual, r.failOpenNames())
			verify = true
		case !ours || rec.State != StateEnforced:
			wanted = h.views(kind, admissionregistrationv1.Ignore, false)
			probe = true
		}
		diffs, reach := diffHooks(wanted, actual)
		probe = probe || reach
		where := fmt.Sprintf("%s webhook configuration %q", kind, r.opts.Module)
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
	if probe && known {
		// Enforced before: the webhooks stay enforced, on the client
		// configuration they have, while the new one is proven on the
		// canary alone, which admits nothing; then one write per
		// configuration switches them.
		webhooks := map[string]any{}
		for i, kind := range kinds {
			webhooks[kind] = h.proving(kind, enforce, actuals[i], failedOpenNow[i])
		}
		if err := r.writeEach(ctx, webhooks, h.hash, StateProving); err != nil {
			return drift, true, err
		}
		events.Info(r.opts.Log, events.WebhooksProving, "webhooks stay enforced; proving their new client configuration on the canary")
		if err := r.probe(ctx); err != nil {
			return drift, true, err
		}
	} else if probe {
		// A first install: nothing was enforced, so nothing is weakened.
		if err := r.write(ctx, h, admissionregistrationv1.Ignore, StateProbing); err != nil {
			return drift, true, err
		}
		events.Info(r.opts.Log, events.WebhooksRegistered, "webhooks registered with failurePolicy Ignore; probing reachability")
		if err := r.probe(ctx); err != nil {
			return drift, true, err
		}
	} else if verify {
		if err := r.probe(ctx); err != nil {
			return drift, false, err
		}
		events.Info(r.opts.Log, events.WebhooksReEnforced, "a replica serves again after an outage: enforcing the webhooks that failed open")
	}
	if err := r.write(ctx, h, enforce, StateEnforced); err != nil {
		return drift, true, err
	}
	r.enforced.Store(true)
	events.Info(r.opts.Log, events.WebhooksEnforced, "webhooks enforced", "failurePolicy", string(enforce))
	return drift, true, nil
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

// hookView is what Sync compares of a webhook, mutating or validating, with
// the API server's defaults filled in.
type hookView struct {
	name               string
	clientConfig       admissionregistrationv1.WebhookClientConfig
	rules              []admissionregistrationv1.RuleWithOperations
	failurePolicy      admissionregistrationv1.FailurePolicyType
	matchPolicy        admissionregistrationv1.MatchPolicyType
	namespaceSelector  *metav1.LabelSelector
	objectSelector     *metav1.LabelSelector
	sideEffects        *admissionregistrationv1.SideEffectClass
	timeoutSeconds     int32
	reviewVersions     []string
	reinvocationPolicy admissionregistrationv1.ReinvocationPolicyType
	matchConditions    []admissionregistrationv1.MatchCondition
}

func viewOf(name string, cc admissionregistrationv1.WebhookClientConfig, rules []admissionregistrationv1.RuleWithOperations,
	fp *admissionregistrationv1.FailurePolicyType, mp *admissionregistrationv1.MatchPolicyType, ns, obj *metav1.LabelSelector,
	se *admissionregistrationv1.SideEffectClass, timeout *int32, versions []string, rp *admissionregistrationv1.ReinvocationPolicyType,
	conds []admissionregistrationv1.MatchCondition) hookView {
	v := hookView{
		name: name, clientConfig: *cc.DeepCopy(), failurePolicy: ptr.Deref(fp, admissionregistrationv1.Fail),
		matchPolicy: ptr.Deref(mp, admissionregistrationv1.Equivalent), namespaceSelector: ns, objectSelector: obj,
		sideEffects: se, timeoutSeconds: ptr.Deref(timeout, 10), reviewVersions: versions,
		reinvocationPolicy: ptr.Deref(rp, ""), matchConditions: conds,
	}
	if v.namespaceSelector == nil {
		v.namespaceSelector = &metav1.LabelSelector{}
	}
	if v.objectSelector == nil {
		v.objectSelector = &metav1.LabelSelector{}
	}
	if s := v.clientConfig.Service; s != nil && s.Port == nil {
		s.Port = ptr.To[int32](443)
	}
	for _, r := range rules {
		r = *r.DeepCopy()
		if r.Scope == nil {
			r.Scope = ptr.To(admissionregistrationv1.AllScopes)
		}
		v.rules = append(v.rules, r)
	}
	return v
}

func mutatingViews(ws []admissionregistrationv1.MutatingWebhook) []hookView {
	var out []hookView
	for _, w := range ws {
		rp := w.ReinvocationPolicy
		if rp == nil {
			rp = ptr.To(admissionregistrationv1.NeverReinvocationPolicy)
		}
		out = append(out, viewOf(w.Name, w.ClientConfig, w.Rules, w.FailurePolicy, w.MatchPolicy, w.NamespaceSelector, w.ObjectSelector,
			w.SideEffects, w.TimeoutSeconds, w.AdmissionReviewVersions, rp, w.MatchConditions))
	}
	return out
}

func validatingViews(ws []admissionregistrationv1.ValidatingWebhook) []hookView {
	var out []hookView
	for _, w := range ws {
		out = append(out, viewOf(w.Name, w.ClientConfig, w.Rules, w.FailurePolicy, w.MatchPolicy, w.NamespaceSelector, w.ObjectSelector,
			w.SideEffects, w.TimeoutSeconds, w.AdmissionReviewVersions, nil, w.MatchConditions))
	}
	return out
}

// withPolicy returns the webhooks of one configuration as written with the
// failure policy given — enforcing, each capability's own where it has
// one; the canary is always Ignore.
func (h *hooks) withPolicy(kind string, policy admissionregistrationv1.FailurePolicyType, enforcing bool) any {
	of := func(name string) *admissionregistrationv1.FailurePolicyType {
		if p, ok := h.policies[name]; ok && enforcing {
			return ptr.To(p)
		}
		return ptr.To(policy)
	}
	if kind == "mutating" {
		ws := slices.Clone(h.mutating)
		for i := range ws {
			if !IsCanary(ws[i].Name) {
				ws[i].FailurePolicy = of(ws[i].Name)
			}
		}
		return ws
	}
	ws := slices.Clone(h.validating)
	for i := range ws {
		if !IsCanary(ws[i].Name) {
			ws[i].FailurePolicy = of(ws[i].Name)
		}
	}
	return ws
}

// proving returns the webhooks of one configuration as written while a new
// client configuration is proven: each webhook the configuration has keeps
// its client configuration (URL or Service, and caBundle) and gets its
// enforced failure policy, with the rules, selectors and match conditions
// of the spec — everything that does not question reachability is
// enforced at once; a webhook the configuration lacks, never enforced, is
// Ignore until the proof, unless the whole configuration was emptied
// (re-created, or its webhooks removed) after the module enforced it: then
// every webhook is restored at its enforced policy at once, as a repair of
// a failure policy is — the empty configuration admitted everything
// already, and the canary that follows proves the client configuration.
// The canary alone carries the new client configuration, at Ignore.
//
// Webhooks the watcher failed open (failedOpen) stay Ignore until the proof:
// no replica was known to serve them.
func (h *hooks) proving(kind string, enforce admissionregistrationv1.FailurePolicyType, actual []hookView, failedOpen []string) any {
	old := map[string]hookView{}
	for _, a := range actual {
		if !IsCanary(a.name) {
			old[a.name] = a
		}
	}
	keep := func(name string, cc *admissionregistrationv1.WebhookClientConfig, fp **admissionregistrationv1.FailurePolicyType) {
		if IsCanary(name) {
			return
		}
		a, ok := old[name]
		switch {
		case ok && slices.Contains(failedOpen, name) && a.failurePolicy == admissionregistrationv1.Ignore:
			*cc, *fp = *a.clientConfig.DeepCopy(), ptr.To(admissionregistrationv1.Ignore)
		case ok:
			*cc = *a.clientConfig.DeepCopy()
		case len(old) > 0:
			*fp = ptr.To(admissionregistrationv1.Ignore)
		}
	}
	if kind == "mutating" {
		ws := slices.Clone(h.withPolicy(kind, enforce, true).([]admissionregistrationv1.MutatingWebhook))
		for i := range ws {
			keep(ws[i].Name, &ws[i].ClientConfig, &ws[i].FailurePolicy)
		}
		return ws
	}
	ws := slices.Clone(h.withPolicy(kind, enforce, true).([]admissionregistrationv1.ValidatingWebhook))
	for i := range ws {
		keep(ws[i].Name, &ws[i].ClientConfig, &ws[i].FailurePolicy)
	}
	return ws
}

// CanaryName names a module's canary webhook.
func CanaryName(module string) string { return "canary." + module + ".vigil.dev" }

// IsCanary reports whether a webhook is a module's canary.
func IsCanary(name string) bool { return strings.HasPrefix(name, "canary.") }

// views are the webhooks of one configuration as Sync compares them.
func (h *hooks) views(kind string, policy admissionregistrationv1.FailurePolicyType, enforcing bool) []hookView {
	if kind == "mutating" {
		return mutatingViews(h.withPolicy(kind, policy, enforcing).([]admissionregistrationv1.MutatingWebhook))
	}
	return validatingViews(h.withPolicy(kind, policy, enforcing).([]admissionregistrationv1.ValidatingWebhook))
}

// diffHooks says in words how the actual webhooks differ from those wanted,
// and whether reachability is in question: a wanted webhook's client
// configuration (URL, Service or caBundle) is not as wanted.
func diffHooks(want, actual []hookView) (diffs []string, reach bool) {
	names := func(vs []hookView) []string {
		var out []string
		for _, v := range vs {
			out = append(out, v.name)
		}
		return out
	}
	byName := map[string]hookView{}
	for _, a := range actual {
		byName[a.name] = a
	}
	var missing []string
	for _, w := range want {
		a, ok := byName[w.name]
		if !ok {
			missing = append(missing, w.name)
			continue
		}
		var fields []string
		eq := apiequality.Semantic.DeepEqual
		if !bytes.Equal(a.clientConfig.CABundle, w.clientConfig.CABundle) {
			fields, reach = append(fields, "caBundle"), true
		}
		ac, wc := a.clientConfig, w.clientConfig
		ac.CABundle, wc.CABundle = nil, nil
		if !eq(ac, wc) {
			fields, reach = append(fields, "clientConfig"), true
		}
		if !eq(a.rules, w.rules) {
			fields = append(fields, "rules")
		}
		if a.failurePolicy != w.failurePolicy {
			fields = append(fields, fmt.Sprintf("failurePolicy %s (want %s)", a.failurePolicy, w.failurePolicy))
		}
		if a.timeoutSeconds != w.timeoutSeconds {
			fields = append(fields, fmt.Sprintf("timeoutSeconds %d (want %d)", a.timeoutSeconds, w.timeoutSeconds))
		}
		if !eq(a.namespaceSelector, w.namespaceSelector) {
			fields = append(fields, "namespaceSelector")
		}
		if !eq(a.objectSelector, w.objectSelector) {
			fields = append(fields, "objectSelector")
		}
		if !eq(a.matchConditions, w.matchConditions) {
			fields = append(fields, "matchConditions")
		}
		if a.matchPolicy != w.matchPolicy {
			fields = append(fields, "matchPolicy")
		}
		if !eq(a.sideEffects, w.sideEffects) {
			fields = append(fields, "sideEffects")
		}
		if !eq(a.reviewVersions, w.reviewVersions) {
			fields = append(fields, "admissionReviewVersions")
		}
		if a.reinvocationPolicy != w.reinvocationPolicy {
			fields = append(fields, "reinvocationPolicy")
		}
		if len(fields) > 0 {
			diffs = append(diffs, fmt.Sprintf("webhook %s: %s", w.name, strings.Join(fields, ", ")))
		}
	}
	if len(missing) > 0 {
		diffs = append(diffs, "webhooks missing: "+strings.Join(missing, ", "))
		if len(missing) == len(want) {
			reach = true // nothing of the registration is left
		}
	}
	wanted := names(want)
	var extra []string
	for _, a := range actual {
		if !slices.Contains(wanted, a.name) {
			extra = append(extra, a.name)
		}
	}
	if len(extra) > 0 {
		diffs = append(diffs, "webhooks not of the module's spec: "+strings.Join(extra, ", "))
	}
	if len(missing) == 0 && len(extra) == 0 && !slices.Equal(names(actual), wanted) {
		diffs = append(diffs, "webhooks out of order")
	}
	return diffs, reach
}

// Check reports whether both configurations still exist: an admin may have
// deleted one (ErrMissing). It recreates nothing.
func (r *Registrar) Check(ctx context.Context) error {
	_, err := r.records(ctx)
	return err
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
	for _, kind := range kinds {
		body := map[string]any{"metadata": map[string]any{"annotations": map[string]any{Annotation: nil}}, "webhooks": []any{}}
		if err := r.patch(ctx, kind, body); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

type hooks struct {
	mutating   []admissionregistrationv1.MutatingWebhook
	validating []admissionregistrationv1.ValidatingWebhook
	// policies are the enforced failure policies of the webhooks whose
	// capability overrides the module's.
	policies map[string]admissionregistrationv1.FailurePolicyType
	hash     string
}

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

// build turns the bindings registered when ready into webhooks, one per
// capability and action, plus the canary.
func (r *Registrar) build() (*hooks, error) { return r.hooksFor(false) }

func (r *Registrar) hooksFor(static bool) (*hooks, error) {
	type group struct {
		capability string
		action     spec.Action
		namespaces []string
		optOut     string
		rules      map[schema.GroupVersionResource][]admissionregistrationv1.OperationType
	}
	groups := map[string]*group{}
	var order []string
	for _, b := range r.opts.Bindings {
		if b.FailClosed != static {
			continue
		}
		key := b.Capability + "/" + b.Action.String()
		g, ok := groups[key]
		if !ok {
			g = &group{capability: b.Capability, action: b.Action, namespaces: b.Namespaces, optOut: b.OptOut, rules: map[schema.GroupVersionResource][]admissionregistrationv1.OperationType{}}
			groups[key] = g
			order = append(order, key)
		}
		kind := b.ResourceKind()
		m, err := r.opts.Mapper.RESTMapping(kind.GroupKind(), kind.Version)
		if err != nil {
			return nil, fmt.Errorf("register binding %s: resource of %s: %w", b.ID(), kind, err)
		}
		res := m.Resource
		if b.Subresource != "" {
			res.Resource += "/" + b.Subresource
		}
		for _, op := range b.Operations {
			ops := g.rules[res]
			if !slices.Contains(ops, admissionregistrationv1.OperationType(op)) {
				g.rules[res] = append(ops, admissionregistrationv1.OperationType(op))
			}
		}
	}
	sort.Strings(order)
	h := &hooks{}
	caBundle := r.opts.CABundle()
	for _, key := range order {
		g := groups[key]
		// Each capability's webhook calls its own path, so that a request its
		// webhook and another capability's both match runs each binding once.
		path := admit.CapabilityPath(g.action, r.opts.Module, g.capability)
		cc := r.opts.ClientConfig(path)
		cc.CABundle = caBundle
		name := WebhookName(r.opts.Module, g.capability, g.action)
		if p, ok := r.opts.Policies[g.capability]; ok && !static {
			if h.policies == nil {
				h.policies = map[string]admissionregistrationv1.FailurePolicyType{}
			}
			h.policies[name] = admissionregistrationv1.Ignore
			if p != admission.Ignore {
				h.policies[name] = admissionregistrationv1.Fail
			}
		}
		rules := rulesOf(g.rules)
		selector, objects := r.namespaceSelector(g.namespaces, g.optOut), objectSelector(g.optOut)
		conds := r.matchConditions()
		if g.action == spec.Mutate {
			h.mutating = append(h.mutating, admissionregistrationv1.MutatingWebhook{
				Name: name, ClientConfig: cc, Rules: rules, NamespaceSelector: selector, ObjectSelector: objects, MatchConditions: conds,
				SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"},
				TimeoutSeconds: ptr.To(r.opts.TimeoutSeconds), MatchPolicy: ptr.To(admissionregistrationv1.Exact),
				ReinvocationPolicy: ptr.To(admissionregistrationv1.NeverReinvocationPolicy),
			})
		} else {
			h.validating = append(h.validating, admissionregistrationv1.ValidatingWebhook{
				Name: name, ClientConfig: cc, Rules: rules, NamespaceSelector: selector, ObjectSelector: objects, MatchConditions: conds,
				SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"},
				TimeoutSeconds: ptr.To(r.opts.TimeoutSeconds), MatchPolicy: ptr.To(admissionregistrationv1.Exact),
			})
		}
	}
	if static {
		return h, nil
	}
	// The canary: one labelled ConfigMap in the module's own namespace, never
	// anything else, and never blocking. It is a mutating webhook (that
	// mutates nothing) because the API server calls every mutating webhook
	// before any ValidatingAdmissionPolicy or validating webhook: a policy
	// that refuses the ConfigMap cannot keep the canary from the module, and
	// the warning it echoes stays on the refused answer (see reached).
	cc := r.opts.ClientConfig(admit.CanaryPath(r.opts.Module))
	cc.CABundle = caBundle
	h.mutating = append(h.mutating, admissionregistrationv1.MutatingWebhook{
		Name: CanaryName(r.opts.Module), ClientConfig: cc, ReinvocationPolicy: ptr.To(admissionregistrationv1.NeverReinvocationPolicy),
		MatchPolicy: ptr.To(admissionregistrationv1.Exact),
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
		}},
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: r.opts.Namespace}},
		ObjectSelector:    &metav1.LabelSelector{MatchLabels: map[string]string{CanaryLabel: r.opts.Module}},
		FailurePolicy:     ptr.To(admissionregistrationv1.Ignore),
		SideEffects:       ptr.To(admissionregistrationv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"},
		TimeoutSeconds: ptr.To[int32](5),
	})
	sum := sha256.New()
	_ = json.NewEncoder(sum).Encode(struct {
		M []admissionregistrationv1.MutatingWebhook
		V []admissionregistrationv1.ValidatingWebhook
		P map[string]admissionregistrationv1.FailurePolicyType `json:",omitempty"`
	}{h.mutating, h.validating, h.policies})
	h.hash = hex.EncodeToString(sum.Sum(nil))[:16]
	return h, nil
}

func rulesOf(m map[schema.GroupVersionResource][]admissionregistrationv1.OperationType) []admissionregistrationv1.RuleWithOperations {
	keys := make([]schema.GroupVersionResource, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	var rules []admissionregistrationv1.RuleWithOperations
	for _, k := range keys {
		ops := m[k]
		slices.Sort(ops)
		rules = append(rules, admissionregistrationv1.RuleWithOperations{
			Operations: ops,
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{k.Group}, APIVersions: []string{k.Version}, Resources: []string{k.Resource}},
		})
	}
	return rules
}

// namespaceSelector keeps the webhooks out of the namespaces
// ExcludedNamespaces names and the configured ones, and, when the capability
// has an opt-out label, out of namespaces labelled with it; a capability
// limited to namespaces gets only those.
func (r *Registrar) namespaceSelector(only []string, optOut string) *metav1.LabelSelector {
	return namespaceSelector(ExcludedNamespaces(r.opts.Namespace, r.opts.ExcludeNamespaces...), only, optOut)
}

func namespaceSelector(excluded, only []string, optOut string) *metav1.LabelSelector {
	s := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpNotIn, Values: excluded},
	}}
	if optOut != "" {
		s.MatchExpressions = append(s.MatchExpressions, metav1.LabelSelectorRequirement{
			Key: optOut, Operator: metav1.LabelSelectorOpNotIn, Values: []string{spec.OptOutValue},
		})
	}
	if len(only) > 0 {
		s.MatchExpressions = append(s.MatchExpressions, metav1.LabelSelectorRequirement{
			Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpIn, Values: only,
		})
	}
	return s
}

// objectSelector keeps objects labelled with the capability's opt-out label
// away; nil (every object) when it has none.
func objectSelector(optOut string) *metav1.LabelSelector {
	if optOut == "" {
		return nil
	}
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: optOut, Operator: metav1.LabelSelectorOpNotIn, Values: []string{spec.OptOutValue}},
	}}
}

// ExcludedNamespaces are the namespaces no webhook of a module running in
// namespace own ever matches, sorted: its own, kube-system and
// kube-node-lease (the Kubernetes admission webhook good practices), and
// extra.
func ExcludedNamespaces(own string, extra ...string) []string {
	out := append([]string{own, metav1.NamespaceSystem, corev1.NamespaceNodeLease}, extra...)
	slices.Sort(out)
	return slices.Compact(out)
}

// Plumbing are the kinds no webhook ever matches, by a match condition: the
// cluster's own plumbing, which a webhook must never stand in the way of.
var Plumbing = []schema.GroupKind{
	{Group: "", Kind: "Node"},
	{Group: "coordination.k8s.io", Kind: "Lease"},
	{Group: "certificates.k8s.io", Kind: "CertificateSigningRequest"},
}

// IsPlumbing reports whether a kind is one of Plumbing.
func IsPlumbing(group, kind string) bool {
	return slices.Contains(Plumbing, schema.GroupKind{Group: group, Kind: kind})
}

// matchConditions keep cluster plumbing away and exclude exactly the objects
// the module's gates wait for, so its webhooks never stand in its own way.
func (r *Registrar) matchConditions() []admissionregistrationv1.MatchCondition {
	return matchConditions(r.opts.Gated)
}

func matchConditions(excluded []spec.Exclusion) []admissionregistrationv1.MatchCondition {
	var plumbing []string
	for _, gk := range Plumbing {
		plumbing = append(plumbing, fmt.Sprintf(`!(request.kind.group == %q && request.kind.kind == %q)`, gk.Group, gk.Kind))
	}
	conds := []admissionregistrationv1.MatchCondition{{Name: "not-cluster-plumbing", Expression: strings.Join(plumbing, " && ")}}
	if c, ok := exclusionCondition(excluded); ok {
		conds = append(conds, c)
	}
	return conds
}

var kinds = []string{"mutating", "validating"}

// records reads both configurations' annotations.
func (r *Registrar) records(ctx context.Context) ([2]Record, error) {
	var out [2]Record
	for i, kind := range kinds {
		_, rec, err := r.get(ctx, kind)
		if err != nil {
			return out, err
		}
		out[i] = rec
	}
	return out, nil
}

func (r *Registrar) get(ctx context.Context, kind string) (string, Record, error) {
	rv, rec, _, err := r.read(ctx, kind)
	return rv, rec, err
}

// read gets one configuration: its resourceVersion, its Record and its
// webhooks as Sync compares them.
func (r *Registrar) read(ctx context.Context, kind string) (string, Record, []hookView, error) {
	var m metav1.Object
	var views []hookView
	var err error
	if kind == "mutating" {
		var c *admissionregistrationv1.MutatingWebhookConfiguration
		if c, err = r.c.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, r.opts.Module, metav1.GetOptions{}); err == nil {
			m, views = c, mutatingViews(c.Webhooks)
		}
	} else {
		var c *admissionregistrationv1.ValidatingWebhookConfiguration
		if c, err = r.c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, r.opts.Module, metav1.GetOptions{}); err == nil {
			m, views = c, validatingViews(c.Webhooks)
		}
	}
	if apierrors.IsNotFound(err) {
		return "", Record{}, nil, fmt.Errorf("%w: %s webhook configuration %q: apply the module's manifests, which ship it empty", ErrMissing, kind, r.opts.Module)
	}
	if err != nil {
		return "", Record{}, nil, r.explain("get", kind, err)
	}
	var rec Record
	if raw := m.GetAnnotations()[Annotation]; raw != "" {
		_ = json.Unmarshal([]byte(raw), &rec)
	}
	return m.GetResourceVersion(), rec, views, nil
}

// write patches both configurations, each with a resourceVersion
// precondition, unless a newer version of the module wrote them.
func (r *Registrar) write(ctx context.Context, h *hooks, policy admissionregistrationv1.FailurePolicyType, state string) error {
	webhooks := map[string]any{}
	for _, kind := range kinds {
		webhooks[kind] = h.withPolicy(kind, policy, state == StateEnforced)
	}
	return r.writeEach(ctx, webhooks, h.hash, state)
}

// writeEach patches each configuration with its webhooks, as write does.
func (r *Registrar) writeEach(ctx context.Context, webhooks map[string]any, hash, state string) error {
	for _, kind := range kinds {
		if err := r.writeOne(ctx, kind, webhooks[kind], hash, state); err != nil {
			return err
		}
	}
	return nil
}

func (r *Registrar) writeOne(ctx context.Context, kind string, webhooks any, hash, state string) error {
	backoff := wait.Backoff{Duration: 20 * time.Millisecond, Factor: 2, Jitter: 0.5, Steps: 10, Cap: time.Second}
	for {
		rv, rec, err := r.get(ctx, kind)
		if err != nil {
			return err
		}
		if newer(rec.Version, r.opts.Version) && rec.Version != r.over {
			r.opts.Log.Info("a newer module version registered the webhooks; leaving them", "kind", kind, "theirs", rec.Version, "ours", r.opts.Version)
			return fmt.Errorf("%w: %s webhooks are version %s's, this is %s", ErrNewer, kind, rec.Version, r.opts.Version)
		}
		next := Record{Version: r.opts.Version, Hash: hash, Generation: rec.Generation + 1, State: state, Outages: rec.Outages}
		if rec.Version == next.Version && rec.Hash == hash {
			next.Enforced = rec.Enforced
		}
		if rec.State == StateFailedOpen && rec.FailedOpenSince != "" {
			// The webhooks that failed open enforce again (or are probed):
			// the outage window closes, for the audit to report.
			next.Outages = closeOutage(next.Outages, Outage{From: rec.FailedOpenSince, To: time.Now().UTC().Format(time.RFC3339), Webhooks: rec.FailedOpen})
		}
		if state == "enforced" && next.Enforced == "" {
			next.Enforced = time.Now().UTC().Format(time.RFC3339)
		}
		ann, _ := json.Marshal(next)
		body := map[string]any{
			"metadata": map[string]any{"resourceVersion": rv, "annotations": map[string]any{Annotation: string(ann)}},
			"webhooks": webhooks,
		}
		err = r.patch(ctx, kind, body)
		if apierrors.IsConflict(err) && backoff.Steps > 1 {
			time.Sleep(backoff.Step())
			continue // someone else wrote: read again and decide again
		}
		return err
	}
}

func (r *Registrar) patch(ctx context.Context, kind string, body map[string]any) error {
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	if kind == "mutating" {
		_, err = r.c.AdmissionregistrationV1().MutatingWebhookConfigurations().Patch(ctx, r.opts.Module, types.MergePatchType, data, metav1.PatchOptions{FieldManager: "vigil"})
	} else {
		_, err = r.c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Patch(ctx, r.opts.Module, types.MergePatchType, data, metav1.PatchOptions{FieldManager: "vigil"})
	}
	if err != nil && !apierrors.IsConflict(err) {
		return r.explain("patch", kind, err)
	}
	return err
}

func (r *Registrar) explain(verb, kind string, err error) error {
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("%s the %s webhook configuration %q: %w: the module needs the rule {apiGroups: [admissionregistration.k8s.io], resources: [mutatingwebhookconfigurations, validatingwebhookconfigurations], verbs: [get, patch], resourceNames: [%s]}", verb, kind, r.opts.Module, err, r.opts.Module)
	}
	return fmt.Errorf("%s the %s webhook configuration %q: %w", verb, kind, r.opts.Module, err)
}

// warningFunc adapts a function to client-go's warning handler.
type warningFunc func(text string)

func (f warningFunc) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	f(text)
}

func randomToken() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
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
