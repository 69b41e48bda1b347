package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/runtime/events"
	"github.com/vigilkit/vigil/internal/serving/admit"
	"github.com/vigilkit/vigil/internal/serving/registration"
	"github.com/vigilkit/vigil/store"
)

// Finding is an existing object a capability's validations deny, or one
// its mutations would change that got in while they were failed open.
type Finding struct {
	Capability            string
	Kind, Namespace, Name string
	APIVersion            string
	UID                   types.UID
	// Action is Validate for a denial, Mutate for a skipped mutation.
	Action    spec.Action
	Violation string
	// Created is the object's creationTimestamp.
	Created time.Time
	// Admitted says when it got in relative to the webhooks' enforcement:
	// "before-enforcement", "while-enforced", "while-failed-open" or
	// "unknown".
	Admitted string
	// Outage is the window the capability's webhook was failed open in,
	// when Admitted is "while-failed-open": "FROM/TO", TO empty while it
	// lasts.
	Outage string
	// Policy is the module version whose validations judged it now;
	// Registered, the version that registered the webhooks.
	Policy, Registered string
}

// When an object was admitted relative to enforcement.
const (
	BeforeEnforcement = "before-enforcement"
	WhileEnforced     = "while-enforced"
	// WhileFailedOpen: created while the capability's webhook was failed
	// open, during an outage longer than its FailOpenAfter bound.
	WhileFailedOpen = "while-failed-open"
	Unknown         = "unknown"
)

// Explain says what a finding's Admitted means, for people.
func (f Finding) Explain(enforced time.Time) string {
	switch f.Admitted {
	case WhileFailedOpen:
		from, to, _ := strings.Cut(f.Outage, "/")
		if to == "" {
			to = "now"
		}
		what := "its validations did not run"
		if f.Action == spec.Mutate {
			what = "its mutations did not run"
		}
		return fmt.Sprintf("created %s, while the capability's webhook was failed open during an outage of the admission replicas (%s to %s): %s", f.Created.UTC().Format(time.RFC3339), from, to, what)
	case BeforeEnforcement:
		return fmt.Sprintf("created %s, before the webhooks enforced (since %s): it passed unchecked", f.Created.UTC().Format(time.RFC3339), enforced.UTC().Format(time.RFC3339))
	case WhileEnforced:
		return fmt.Sprintf("created %s, while the webhooks of version %s enforced (since %s): admitted by a capability in Warn or Audit mode, during an outage under failurePolicy Ignore, or before the policy changed", f.Created.UTC().Format(time.RFC3339), f.Registered, enforced.UTC().Format(time.RFC3339))
	default:
		return fmt.Sprintf("created %s; the webhooks' registration records no enforcement time", f.Created.UTC().Format(time.RFC3339))
	}
}

// metrics are the audit's, in controller-runtime's registry, which the
// watcher serves; registered once per process.
var (
	metricsOnce sync.Once
	runs        *prometheus.CounterVec
	found       *prometheus.GaugeVec
)

func registerMetrics() {
	metricsOnce.Do(func() {
		runs = prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "vigil", Subsystem: "audit", Name: "runs_total",
			Help: "Runs of the audit of existing objects, by result (done, error).",
		}, []string{"module", "result"})
		found = prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "vigil", Subsystem: "audit", Name: "findings",
			Help: "Existing objects the validations deny, or that missed a mutation while it was failed open, as the last audit found them, by when they were admitted (before-enforcement, while-enforced, while-failed-open, unknown).",
		}, []string{"module", "admitted"})
		ctrlmetrics.Registry.MustRegister(runs, found)
	})
}

// Auditor audits one module.
type Auditor struct {
	Module  *spec.Module
	Handler *admit.Handler
	Config  *rest.Config
	Log     logr.Logger
	// Store, when set, is a capability's scope of the module's Store, where
	// each run keeps its Report.
	Store func(capability string) store.Store
	// PageSize is how many objects one page of the audit's lists holds
	// when it pages; zero is DefaultPageSize. Memory is bounded by it, not
	// by the cluster.
	PageSize int64
	// Paged lists every kind page by page. Otherwise each kind is streamed
	// (eachStreamed), and paged only where the API server does not stream
	// or a stream ends early.
	Paged bool
	// StreamSilence is how long a stream may give nothing before the audit
	// gives it up and pages; zero is DefaultStreamSilence.
	StreamSilence time.Duration

	// saidListsOnly: the auditor has said once that the API server does
	// not stream lists; it says so again only at V(1).
	saidListsOnly atomic.Bool
	// stream, when not nil, is what each stream passes through: the tests
	// end one early with it.
	stream func(watch.Interface) watch.Interface

	csOnce sync.Once
	hc     *http.Client
	cs     kubernetes.Interface
	csErr  error
}

// client is the audit's clientset, and httpClient the HTTP client every
// client of the audit shares, made once: a role's config may carry a dialer
// of its own, and client-go then makes a new transport, with connections of
// its own, for each client made from it.
func (a *Auditor) client() (kubernetes.Interface, error) {
	a.csOnce.Do(func() {
		if a.hc, a.csErr = rest.HTTPClientFor(a.Config); a.csErr == nil {
			a.cs, a.csErr = kubernetes.NewForConfigAndClient(a.Config, a.hc)
		}
	})
	return a.cs, a.csErr
}

func (a *Auditor) httpClient() (*http.Client, error) {
	_, err := a.client()
	return a.hc, err
}

// Enforced is since when the module's webhooks enforce, as their
// registration records it (RFC 3339); "" before they do.
func (a *Auditor) Enforced(ctx context.Context) (string, error) {
	cs, err := a.client()
	if err != nil {
		return "", err
	}
	rec, err := registration.ReadRecord(ctx, cs, a.Module.Name)
	return rec.Enforced, err
}

// Run runs the validations over the objects that exist, as if they were
// created now, and reports each denial as a Warning Event on the object, a
// log line (audit-violation) and the metric vigil_audit_findings. Nothing is
// denied or changed.
func (a *Auditor) Run(ctx context.Context) ([]Finding, error) {
	findings, err := a.run(ctx)
	result := "done"
	if err != nil {
		result = "error"
	}
	registerMetrics()
	runs.WithLabelValues(a.Module.Name, result).Inc()
	if err == nil {
		counts := map[string]float64{BeforeEnforcement: 0, WhileEnforced: 0, WhileFailedOpen: 0, Unknown: 0}
		for _, f := range findings {
			counts[f.Admitted]++
		}
		for k, v := range counts {
			found.WithLabelValues(a.Module.Name, k).Set(v)
		}
	}
	return findings, err
}

func (a *Auditor) run(ctx context.Context) ([]Finding, error) {
	began := time.Now()
	m := a.Module
	cs, err := a.client()
	if err != nil {
		return nil, err
	}
	hc, err := a.httpClient()
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfigAndClient(a.Config, hc)
	if err != nil {
		return nil, err
	}
	mapper, err := apiutil.NewDynamicRESTMapper(a.Config, hc)
	if err != nil {
		return nil, err
	}
	r := a.startRun(ctx, cs)
	for gvk, namespaces := range m.AuditedKinds() {
		if !validated(m, gvk) && len(r.mutWindows) == 0 {
			continue // only mutations, which no outage has skipped: nothing to list
		}
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil && meta.IsNoMatchError(err) && ifServedOnly(m, gvk) {
			continue // not served: its bindings are not registered either
		}
		if err != nil {
			return r.findings, fmt.Errorf("audit %s: %w", gvk, err)
		}
		if len(namespaces) == 0 {
			namespaces = []string{metav1.NamespaceAll}
		}
		res := dyn.Resource(mapping.Resource)
		for _, ns := range namespaces {
			err := r.each(ctx, res.Namespace(ns), mapping.Resource.Resource, func(item runtime.Object) error {
				obj, ok := item.(*unstructured.Unstructured)
				if !ok {
					return fmt.Errorf("a list item of %s is a %T, not an unstructured object", mapping.Resource.Resource, item)
				}
				// Judged, then dropped: only its findings are kept.
				defer func() { *obj = unstructured.Unstructured{} }()
				r.judge(gvk, mapping, obj)
				r.objects.Add(1)
				r.progress()
				return nil
			})
			if err != nil && r.absent(ns, err) {
				continue // a namespace the module governs that no team has made yet: nothing in it
			}
			if err != nil {
				return r.findings, fmt.Errorf("audit %s in %q: %w", mapping.Resource.Resource, ns, err)
			}
		}
	}
	a.writePolicyReports(ctx, r.findings)
	a.keep(ctx, r.findings, r.rec, r.mutRec)
	events.Info(a.Log, events.AuditDone, "audit done", "violations", len(r.findings), "policyVersion", m.Version, "enforcedSince", r.rec.Enforced, "took", time.Since(began).Round(time.Millisecond).String(),
		"objects", r.objects.Load(), "streams", r.streams.Load(), "pages", r.pages.Load(), "slowestPage", r.slowestPage())
	return r.findings, nil
}

// absent reports whether err refused a list in namespace ns because ns does
// not exist yet: the watcher binds its rights in a governed namespace once it
// exists (internal/runtime/rolebind), and is refused there until then.
func (r *auditRun) absent(ns string, err error) bool {
	if ns == metav1.NamespaceAll || !apierrors.IsForbidden(err) {
		return false
	}
	_, gerr := r.cs.CoreV1().Namespaces().Get(r.ctx, ns, metav1.GetOptions{})
	return apierrors.IsNotFound(gerr)
}

// auditRun is one audit as it goes: the registration records it dates the
// findings by, and the findings so far.
type auditRun struct {
	a   *Auditor
	ctx context.Context
	cs  kubernetes.Interface
	// rec and mutRec are the validating and mutating webhooks' records;
	// enforced, when the validating ones were first enforced.
	rec, mutRec            registration.Record
	enforced               time.Time
	valWindows, mutWindows []registration.Outage
	findings               []Finding
	// labelled are the exclusion policies of the capabilities with an
	// opt-out or opt-in label, made once per run: see seen.
	labelled map[string]spec.ExclusionPolicy
	// nsLabels are the labels of the namespaces seen, by name.
	nsLabels map[string]map[string]string
	// listsOnly: a stream was refused or fell silent in this run, and the
	// rest of it pages.
	listsOnly bool
	// reported are the findings reported so far, by capability, action
	// and object: an object judged again, after a stream that ended early,
	// is not reported twice.
	reported map[string]bool
	// objects judged, lists streamed and pages listed so far, and the
	// longest a page took (the pager lists in a goroutine of its own,
	// beside the judging); when the run began and last said how far it is.
	objects, streams, pages atomic.Int64
	slowest                 atomic.Int64 // nanoseconds
	began                   time.Time
	lastProgress            atomic.Int64 // Unix nanoseconds
}

// each calls fn with every object of res: streamed, unless the auditor
// pages or the API server does not stream; then, or when the stream ends
// before its last object, page by page (judging again what the stream
// gave, which report does not report twice).
//
// Where the API server refuses to stream (422) or a stream falls silent,
// the rest of the run pages: the next run tries to stream again, so a
// cluster upgraded to serve streams, or a stall that has passed, is
// streamed without a restart, for one refused request a run.
func (r *auditRun) each(ctx context.Context, res dynamic.ResourceInterface, resource string, fn func(runtime.Object) error) error {
	if !r.a.Paged && !r.listsOnly {
		open := res.Watch
		if through := r.a.stream; through != nil {
			open = func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				w, err := res.Watch(ctx, o)
				if err != nil {
					return nil, err
				}
				return through(w), nil
			}
		}
		silence := r.a.StreamSilence
		if silence <= 0 {
			silence = DefaultStreamSilence
		}
		err := eachStreamed(ctx, open, silence, fn)
		var broken *streamError
		switch {
		case !errors.As(err, &broken):
			if err == nil {
				r.streams.Add(1)
			}
			return err
		case broken.seen == 0 && apierrors.IsInvalid(err):
			r.listsOnly = true
			log := r.a.Log
			if r.a.saidListsOnly.Swap(true) {
				log = log.V(1)
			}
			log.Info("audit: the API server does not stream lists (Kubernetes before 1.34, or its WatchList feature off); listing page by page")
		case broken.seen == 0 && apierrors.IsForbidden(err):
			// A role without watch (installed by an older vigil), or a
			// namespace not made yet: the list says which.
			r.a.Log.V(1).Info("audit: may not watch; listing page by page", "resource", resource, "reason", broken.Error())
		default:
			// Judged again as they are paged: counted once.
			r.objects.Add(-broken.seen)
			r.listsOnly = r.listsOnly || broken.stalled
			r.a.Log.Info("audit: listing page by page", "resource", resource, "reason", broken.Error(), "streamed", broken.seen)
		}
	}
	return eachItem(ctx, r.a.PageSize, metav1.ListOptions{}, r.timed(unstructuredList(res)), fn)
}

// progressEvery is how often a long audit says how far it is.
const progressEvery = 30 * time.Second

// timed is list, timing each page for the run's figures, and saying how
// far the run is every progressEvery.
func (r *auditRun) timed(list func(context.Context, metav1.ListOptions) (runtime.Object, error)) func(context.Context, metav1.ListOptions) (runtime.Object, error) {
	return func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		began := time.Now()
		page, err := list(ctx, o)
		r.pages.Add(1)
		for took := int64(time.Since(began)); ; {
			if s := r.slowest.Load(); took <= s || r.slowest.CompareAndSwap(s, took) {
				break
			}
		}
		r.progress()
		return page, err
	}
}

// progress says how far the run is, every progressEvery.
func (r *auditRun) progress() {
	last := r.lastProgress.Load()
	if time.Since(time.Unix(0, last)) < progressEvery || !r.lastProgress.CompareAndSwap(last, time.Now().UnixNano()) {
		return
	}
	events.Info(r.a.Log, events.AuditProgress, "audit going on", "objects", r.objects.Load(), "streams", r.streams.Load(), "pages", r.pages.Load(),
		"slowestPage", r.slowestPage(), "elapsed", time.Since(r.began).Round(time.Second).String())
}

// slowestPage is the longest one list of the run took, as text.
func (r *auditRun) slowestPage() string {
	return time.Duration(r.slowest.Load()).Round(time.Millisecond).String()
}

// startRun reads the registration records the findings are dated by; a
// record that cannot be read leaves its findings undated.
func (a *Auditor) startRun(ctx context.Context, cs kubernetes.Interface) *auditRun {
	m := a.Module
	r := &auditRun{a: a, ctx: ctx, cs: cs, began: time.Now(), reported: map[string]bool{}}
	r.lastProgress.Store(r.began.UnixNano())
	rec, err := registration.ReadRecord(ctx, cs, m.Name)
	if err != nil {
		a.Log.Info("audit: cannot read the webhooks' registration record; findings cannot say when they were admitted", "err", err.Error())
	}
	r.rec = rec
	if m.AuditsMutations() {
		if r.mutRec, err = registration.ReadMutatingRecord(ctx, cs, m.Name); err != nil {
			a.Log.Info("audit: cannot read the mutating webhooks' registration record; mutations skipped during outages go unreported", "err", err.Error())
		}
	}
	r.enforced = r.rec.EnforcedAt()
	for _, c := range m.Capabilities {
		if c.OptOut != nil || c.OptIn != nil {
			if r.labelled == nil {
				r.labelled = map[string]spec.ExclusionPolicy{}
			}
			r.labelled[c.Name] = m.ExclusionPolicy().Of(m.Name, c)
		}
	}
	r.valWindows, r.mutWindows = r.rec.Windows(), r.mutRec.Windows()
	return r
}

// outage is the window in which the capability's webhook for action was
// failed open when t was, or "".
func (r *auditRun) outage(capability string, action spec.Action, t time.Time) string {
	windows := r.valWindows
	if action == spec.Mutate {
		windows = r.mutWindows
	}
	hook := spec.WebhookName(r.a.Module.Name, capability, action)
	for _, w := range windows {
		if w.Covers(hook, t) {
			return w.From + "/" + w.To
		}
	}
	return ""
}

// report keeps a finding, logs it and records it as an Event on obj.
func (r *auditRun) report(f Finding, obj *unstructured.Unstructured) {
	m := r.a.Module
	key := strings.Join([]string{f.Capability, string(f.Action), f.Namespace, f.Name, string(obj.GetUID())}, "\x00")
	if r.reported[key] {
		return
	}
	r.reported[key] = true
	r.findings = append(r.findings, f)
	events.Info(r.a.Log, events.AuditViolation, "audit: an existing object violates a validation or missed a mutation",
		"capability", f.Capability, "action", string(f.Action), "kind", f.Kind, "namespace", f.Namespace, "name", f.Name, "violation", f.Violation,
		"admitted", f.Admitted, "outage", f.Outage, "created", f.Created.UTC().Format(time.RFC3339), "enforcedSince", r.rec.Enforced,
		"policyVersion", f.Policy, "registeredVersion", f.Registered)
	what := "this object violates a validation"
	if f.Action == spec.Mutate {
		what = "this object missed a mutation"
	}
	recordEvent(r.ctx, r.cs, m.Name, obj, fmt.Sprintf("vigil module %s (version %s), capability %s: %s; %s: %s", m.Name, versionOrNone(m.Version), f.Capability, what, f.Explain(r.enforced), f.Violation))
}

// seen reports whether the capability's webhooks would see obj were it
// created now: what its exclusions leave out — a namespace or object that
// opted out, a namespace that did not opt in — is no violation of it.
func (r *auditRun) seen(capability string, gvk schema.GroupVersionKind, obj *unstructured.Unstructured) bool {
	p, labelled := r.labelled[capability]
	if !labelled {
		return true // its other exclusions are the audit's own (namespaces, kinds)
	}
	ns := obj.GetNamespace()
	if gvk.Group == "" && gvk.Kind == "Namespace" {
		ns = obj.GetName()
	}
	return p.Admits(spec.AdmissionRequest{
		Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Namespace: ns, Name: obj.GetName(),
		Labels: obj.GetLabels(), NamespaceLabels: r.namespaceLabels(ns),
	})
}

// namespaceLabels are the labels of namespace ns, read once per run; nil
// when it cannot be read.
func (r *auditRun) namespaceLabels(ns string) map[string]string {
	if ns == "" {
		return nil
	}
	if labels, ok := r.nsLabels[ns]; ok {
		return labels
	}
	var labels map[string]string
	if got, err := r.cs.CoreV1().Namespaces().Get(r.ctx, ns, metav1.GetOptions{}); err == nil {
		labels = got.Labels
	}
	if r.nsLabels == nil {
		r.nsLabels = map[string]map[string]string{}
	}
	r.nsLabels[ns] = labels
	return labels
}

// judge reviews one existing object as if it were created now: its
// validations' denials, and the mutations that would still change what got
// in while they were failed open.
func (r *auditRun) judge(gvk schema.GroupVersionKind, mapping *meta.RESTMapping, obj *unstructured.Unstructured) {
	m := r.a.Module
	raw, err := obj.MarshalJSON()
	if err != nil {
		return
	}
	request := func() *admissionv1.AdmissionRequest {
		return &admissionv1.AdmissionRequest{
			UID:       types.UID(fmt.Sprintf("audit-%s", obj.GetUID())),
			Kind:      metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
			Resource:  metav1.GroupVersionResource{Group: mapping.Resource.Group, Version: mapping.Resource.Version, Resource: mapping.Resource.Resource},
			Namespace: obj.GetNamespace(), Name: obj.GetName(), Operation: admissionv1.Create,
			Object: runtime.RawExtension{Raw: raw},
		}
	}
	created := obj.GetCreationTimestamp().Time
	base := Finding{Kind: gvk.Kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), APIVersion: gvk.GroupVersion().String(), UID: obj.GetUID(), Created: created,
		Policy: m.Version, Registered: r.rec.Version, Admitted: Unknown}
	for _, d := range r.a.Handler.Audit(r.ctx, request()) {
		if !r.seen(d.Capability, gvk, obj) {
			continue
		}
		f := base
		f.Capability, f.Action, f.Violation = d.Capability, spec.Validate, d.Message
		if !r.enforced.IsZero() {
			// creationTimestamp has second precision, as Enforced
			// does: an object of the same second counts as before.
			f.Admitted = BeforeEnforcement
			if created.After(r.enforced) {
				f.Admitted = WhileEnforced
				if w := r.outage(d.Capability, spec.Validate, created); w != "" {
					f.Admitted, f.Outage = WhileFailedOpen, w
				}
			}
		}
		r.report(f, obj)
	}
	// Mutations are audited over what got in while they were
	// failed open: only then did they not run.
	windows := map[string]string{}
	for _, b := range m.Bindings {
		if b.Action == spec.Mutate && spec.Audited(b) && b.GVK == gvk {
			if w := r.outage(b.Capability, spec.Mutate, created); w != "" {
				windows[b.Capability] = w
			}
		}
	}
	if len(windows) == 0 {
		return
	}
	for _, sk := range r.a.Handler.AuditMutations(r.ctx, request(), func(c string) bool { return windows[c] != "" }) {
		if !r.seen(sk.Capability, gvk, obj) {
			continue
		}
		f := base
		f.Capability, f.Action, f.Admitted, f.Outage = sk.Capability, spec.Mutate, WhileFailedOpen, windows[sk.Capability]
		f.Registered = r.mutRec.Version
		f.Violation = "its mutations would still change it: " + describePatch(sk.Patch)
		r.report(f, obj)
	}
}

// ReportKey is the key, in each audited capability's scope of the module's
// Store, of the last audit's Report: findings outlast their Events, which the
// API server drops after an hour.
const ReportKey = "vigil.audit"

// MaxReported is how many findings a Report lists at most; Count counts all.
const MaxReported = 100

// maxViolation bounds a violation's message in a Report, in bytes.
const maxViolation = 512

// Report is what the last audit found for one capability.
type Report struct {
	// AuditedAt is when the run finished (RFC 3339, UTC).
	AuditedAt string `json:"auditedAt"`
	// PolicyVersion is the module version whose validations judged;
	// RegisteredVersion, the one that registered the webhooks;
	// EnforcedSince, since when that one enforces ("" before).
	PolicyVersion     string `json:"policyVersion"`
	RegisteredVersion string `json:"registeredVersion,omitempty"`
	EnforcedSince     string `json:"enforcedSince,omitempty"`
	// Outages are the windows in which the capability's webhooks were
	// failed open, as their registration records them.
	Outages []registration.Outage `json:"outages,omitempty"`
	// Count is the number of findings; Findings lists the first
	// MaxReported.
	Count    int              `json:"count"`
	Findings []ReportedObject `json:"findings"`
}

// ReportedObject is one finding in a Report.
type ReportedObject struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Action is "validate" for a denial, "mutate" for a mutation skipped
	// while failed open.
	Action string `json:"action"`
	// Created is the object's creationTimestamp; Admitted, when that was
	// relative to enforcement: before-enforcement, while-enforced,
	// while-failed-open (Outage names the window), unknown.
	Created   string `json:"created"`
	Admitted  string `json:"admitted"`
	Outage    string `json:"outage,omitempty"`
	Violation string `json:"violation"`
}

// keep writes each audited capability's Report to the Store, replacing the
// last run's; a capability with no findings gets an empty one.
func (a *Auditor) keep(ctx context.Context, findings []Finding, rec, mutRec registration.Record) {
	if a.Store == nil {
		return
	}
	reports := map[string]*Report{}
	var order []string
	for _, b := range a.Module.Bindings {
		if spec.Audited(b) && reports[b.Capability] == nil {
			reports[b.Capability] = &Report{
				AuditedAt: time.Now().UTC().Format(time.RFC3339), PolicyVersion: a.Module.Version,
				RegisteredVersion: rec.Version, EnforcedSince: rec.Enforced, Findings: []ReportedObject{},
			}
			order = append(order, b.Capability)
		}
		if spec.Audited(b) {
			r := reports[b.Capability]
			windows := rec.Windows()
			if b.Action == spec.Mutate {
				windows = mutRec.Windows()
			}
			hook := spec.WebhookName(a.Module.Name, b.Capability, b.Action)
			for _, w := range windows {
				if slices.Contains(w.Webhooks, hook) && !slices.ContainsFunc(r.Outages, func(o registration.Outage) bool { return o.From == w.From }) {
					r.Outages = append(r.Outages, w)
				}
			}
		}
	}
	for _, f := range findings {
		r := reports[f.Capability]
		if r == nil {
			continue
		}
		r.Count++
		if len(r.Findings) < MaxReported {
			v := f.Violation
			if len(v) > maxViolation {
				v = strings.ToValidUTF8(v[:maxViolation], "") + "…"
			}
			r.Findings = append(r.Findings, ReportedObject{Kind: f.Kind, Namespace: f.Namespace, Name: f.Name, Action: string(f.Action),
				Created: f.Created.UTC().Format(time.RFC3339), Admitted: f.Admitted, Outage: f.Outage, Violation: v})
		}
	}
	for _, c := range order {
		data, err := json.Marshal(reports[c])
		if err == nil {
			err = a.Store(c).Set(ctx, ReportKey, string(data))
		}
		if err != nil && ctx.Err() == nil {
			a.Log.Error(err, "audit: keep the findings in the module's Store", "capability", c, "key", ReportKey)
		}
	}
}

// validated reports whether the audit runs validations over gvk's objects.
func validated(m *spec.Module, gvk schema.GroupVersionKind) bool {
	for _, b := range m.Bindings {
		if b.Action == spec.Validate && b.GVK == gvk && spec.Audited(b) {
			return true
		}
	}
	return false
}

// describePatch says what a JSON patch does, briefly: "add
// /metadata/labels/team, replace /spec/replicas".
func describePatch(patch []byte) string {
	var ops []struct {
		Op   string `json:"op"`
		Path string `json:"path"`
	}
	if err := json.Unmarshal(patch, &ops); err != nil || len(ops) == 0 {
		return string(patch)
	}
	var parts []string
	for i, o := range ops {
		if i == 5 {
			parts = append(parts, fmt.Sprintf("and %d more", len(ops)-i))
			break
		}
		parts = append(parts, o.Op+" "+o.Path)
	}
	return strings.Join(parts, ", ")
}

func versionOrNone(v string) string {
	if v == "" {
		return "unversioned"
	}
	return v
}

func recordEvent(ctx context.Context, cs kubernetes.Interface, module string, obj *unstructured.Unstructured, msg string) {
	ns := obj.GetNamespace()
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	now := metav1.Now()
	_, _ = cs.CoreV1().Events(ns).Create(ctx, &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: obj.GetName() + ".", Namespace: ns},
		InvolvedObject: corev1.ObjectReference{
			APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID(),
		},
		Reason:  "AuditViolation",
		Message: msg,
		Type:    corev1.EventTypeWarning, Source: corev1.EventSource{Component: module + "-audit"},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
	}, metav1.CreateOptions{})
}

// ifServedOnly reports whether every binding of the kind is registered only
// while the kind is served (IfServed).
func ifServedOnly(m *spec.Module, gvk schema.GroupVersionKind) bool {
	any := false
	for _, b := range m.Bindings {
		if b.GVK == gvk {
			if !b.IfServed {
				return false
			}
			any = true
		}
	}
	return any
}
