package admit

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/runtime/callctx"
	"github.com/vigilkit/vigil/internal/serving/fresh"
	"github.com/vigilkit/vigil/store"
)

// Options configure a Handler.
type Options struct {
	// Module names the module; it is part of the paths.
	Module string
	// FailurePolicy answers for failed bindings; Fail when empty.
	FailurePolicy admission.FailurePolicy
	// Policies override FailurePolicy for the capabilities they name.
	Policies map[string]admission.FailurePolicy
	// Timeout bounds the bindings of one request. Set it below the webhooks'
	// timeoutSeconds so the API server always hears the failure policy's
	// answer rather than its own timeout; 8s when zero.
	Timeout time.Duration
	// MaxBodyBytes bounds a request body; DefaultMaxBodyBytes when zero.
	MaxBodyBytes int64
	// Store returns the Store of a capability, as its handlers see it; nil
	// when the module has none.
	Store func(capability string) store.Store
	// Metrics records requests; nil records nothing.
	Metrics *Metrics
	Log     logr.Logger
	// Context, when set, gives a binding's context what the role hands its
	// handlers, with s as the binding's Store (its capability's scope,
	// refusing writes on a dry run).
	Context func(ctx context.Context, s store.Store) context.Context
	// Newer, when set, returns the version of the module that registered
	// its webhook configurations when that is newer than this one, else "".
	// It is asked, within Timeout, only about requests this version cannot
	// attribute: while a newer version is registered they are allowed (a
	// rollout), otherwise the failure policy answers them.
	Newer func(ctx context.Context) (string, error)
	// Recheck records each binding's lister reads and decides again, once
	// the listers it read have caught up with the API server, what their
	// cache may have decided wrongly: a denial (an error, for a mutation),
	// or an allow after a read found an object. Set it when the module has
	// listers.
	Recheck bool
	// LogDecisions bounds the decisions logged each second, one
	// events.Decision line each, on Log; 0 logs none.
	LogDecisions int
	// Hooks are the author's functions around every request.
	Hooks spec.Hooks
}

// Handler answers AdmissionReview requests with a module's bindings.
type Handler struct {
	opts     Options
	mutate   []*spec.Binding
	validate []*spec.Binding
	// stores holds each capability's Store, made once rather than per request.
	stores map[string]store.Store
	// caps are the capabilities with bindings, each served on its own path
	// (CapabilityPath); optOut are those served there alone, never on the
	// shared paths: see CapabilityPath.
	caps, optOut map[string]bool
	// lingering counts the requests answered at their deadline whose
	// bindings still run: see Lingering.
	lingering atomic.Int64
	// decisions logs answered requests; nil when they are not logged.
	decisions *decisionLog
}

// NewHandler returns a handler for the bindings.
func NewHandler(bindings []spec.Binding, opts Options) *Handler {
	if opts.FailurePolicy == "" {
		opts.FailurePolicy = admission.Fail
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 8 * time.Second
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.Store == nil {
		opts.Store = func(string) store.Store { return noStore{} }
	}
	h := &Handler{opts: opts, stores: map[string]store.Store{}, caps: map[string]bool{}, optOut: map[string]bool{},
		decisions: newDecisionLog(opts.Log, opts.LogDecisions)}
	for i := range bindings {
		b := &bindings[i]
		h.caps[b.Capability] = true
		if b.OptOut != "" || b.OptIn != "" {
			h.optOut[b.Capability] = true
		}
		if _, ok := h.stores[b.Capability]; !ok {
			h.stores[b.Capability] = opts.Store(b.Capability)
		}
		if b.Action == spec.Mutate {
			h.mutate = append(h.mutate, b)
		} else {
			h.validate = append(h.validate, b)
		}
	}
	return h
}

// prepare finds the bindings to run for one request: those served on the
// path of capability (see servedOn) whose kind, operation and filters match.
// enforce judges every validation as if its capability were in Enforce mode.
// It returns no bindings when none runs.
func (h *Handler) prepare(action spec.Action, capability string, req *admissionv1.AdmissionRequest, enforce bool) (*reviewRun, []*spec.Binding) {
	bindings := h.mutate
	if action == spec.Validate {
		bindings = h.validate
	}
	meta := metaOnce(req)
	var run []*spec.Binding
	for _, b := range bindings {
		if h.servedOn(b, capability) && matches(b, req, meta) {
			run = append(run, b)
		}
	}
	if len(run) == 0 {
		return nil, nil
	}
	return &reviewRun{h: h, req: req, dryRun: req.DryRun != nil && *req.DryRun, enforce: enforce}, run
}

// reviewRun is one request's run through its bindings. It is allocated for
// each request: keep it small (the bindings are review's argument).
type reviewRun struct {
	h      *Handler
	req    *admissionv1.AdmissionRequest
	dryRun bool
	// enforce judges every validation as Enforce mode would: see Handler.Audit.
	enforce bool
	// current is the binding running, for an answer given at the deadline.
	current atomic.Pointer[spec.Binding]
	// in is the input of the last capability run: see input.
	in *input
}

// review is the engine's one review function, through which every request
// is answered, the webhook's (ServeHTTP) and the audit's alike: it applies
// the request's bindings (prepare's, all of action) in the order they were
// declared, each seeing the object as those before it left it, and passes
// each one's outcome through the stages — a recheck on fresh data
// (recheck.go), its metrics (metrics.go), the failure policy when it failed
// (failure.go), its capability's mode when a validation denied (mode.go).
// The first failure or enforced denial answers the request; otherwise it is
// allowed, with the warnings gathered and, for mutations, the patch they add
// up to.
func (rv *reviewRun) review(ctx context.Context, action spec.Action, bindings []*spec.Binding) *admissionv1.AdmissionResponse {
	objs := &objects{req: rv.req}
	defer objs.release()
	var warnings []string
	var joined []admission.Verdict // denials of JoinDenials capabilities
	for _, b := range bindings {
		rv.current.Store(b)
		obj, old, err := objs.decode(b)
		var v admission.Verdict
		if err == nil {
			began := time.Now()
			v, err = rv.apply(ctx, b, objs, obj, old)
			rv.h.observe(b, verdictLabel(b.Action, v, err), time.Since(began))
		}
		if err != nil {
			// A failed mutation may have left half its edits: none are sent.
			resp := rv.h.failed(b, rv.req.Namespace, err)
			resp.Warnings = append(warnings, resp.Warnings...)
			return resp
		}
		warnings = append(warnings, v.Warnings()...)
		switch effectOf(b.Mode, rv.enforce, v.Allowed()) {
		case effectDeny:
			if b.JoinDenials {
				joined = append(joined, v)
				continue
			}
			return denial(joinVerdicts(append(joined, v)), warnings)
		case effectWarn, effectRecord:
			warnings = rv.unenforced(b, v, warnings)
		}
	}
	if len(joined) > 0 {
		return denial(joinVerdicts(joined), warnings)
	}
	if action == spec.Validate {
		return &admissionv1.AdmissionResponse{Allowed: true, Warnings: warnings}
	}
	patch, err := objs.patch()
	if err != nil {
		return rv.h.failed(rv.current.Load(), rv.req.Namespace, err)
	}
	resp := &admissionv1.AdmissionResponse{Allowed: true}
	if len(patch) > 0 {
		pt := admissionv1.PatchTypeJSONPatch
		resp.Patch, resp.PatchType = patch, &pt
	}
	return resp
}

// apply runs binding b on the request's objects: a mutation edits obj and
// answers an allow, a validation answers its verdict. Either runs once more
// on fresh data when the recheck stage says its outcome rests on a cache.
func (rv *reviewRun) apply(ctx context.Context, b *spec.Binding, objs *objects, obj, old client.Object) (admission.Verdict, error) {
	if b.Action == spec.Mutate {
		return admission.Verdict{}, rv.mutateOne(ctx, b, objs, obj, old)
	}
	return rv.validateOne(ctx, b, obj, old)
}

// input is what the bindings of one capability are handed in one request:
// the context they run in (the role's, with the capability's Store and the
// record of lister reads), and their typed request's parts. It is made once
// per capability and request, not per binding: a policy engine runs many
// bindings of one capability on each request.
type input struct {
	capability string
	ctx        context.Context
	call       *spec.Call
	// reads records the lister reads of the binding running; nil when the
	// handler does not recheck. Reset before each run.
	reads *fresh.Reads
}

// running is the name of the binding running, "" between bindings.
func (rv *reviewRun) running() string {
	if b := rv.current.Load(); b != nil {
		return b.Name
	}
	return ""
}

// input is binding b's input, its record of lister reads emptied. ctx is
// the request's, the same for every binding of a reviewRun.
func (rv *reviewRun) input(ctx context.Context, b *spec.Binding) *input {
	in := rv.in
	if in == nil || in.capability != b.Capability {
		st := rv.h.stores[b.Capability]
		if rv.dryRun {
			st = dryRunStore{st}
		}
		in = &input{capability: b.Capability, ctx: ctx, call: &spec.Call{Raw: rv.req, Store: st}}
		if rv.h.opts.Context != nil {
			in.ctx = rv.h.opts.Context(in.ctx, st)
		}
		// The handlers' logger (vigil.LoggerFrom) names the capability, the
		// binding running and the request.
		in.ctx = callctx.WithAdmission(in.ctx, &callctx.Admission{Log: rv.h.opts.Log, Capability: b.Capability, Binding: rv.running, Request: rv.req})
		if rv.h.opts.Recheck {
			in.reads = &fresh.Reads{}
			in.ctx = callctx.WithReads(in.ctx, in.reads)
		}
		rv.in = in
	}
	in.reads.Reset()
	return in
}
