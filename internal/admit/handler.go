package admit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"reflect"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	fastjson "github.com/goccy/go-json"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/callctx"
	"github.com/vigilkit/vigil/internal/events"
	"github.com/vigilkit/vigil/internal/fresh"
	"github.com/vigilkit/vigil/internal/spec"
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
}

// DefaultMaxBodyBytes bounds a review's body when Options.MaxBodyBytes is
// zero: 19 MiB, the largest review the API server can send with room to
// spare. Measured against kube-apiserver 1.37 (TestLargestReviewFitsTheBodyLimit
// in examples/labeler): an UPDATE carries the object and its old version, each
// at most etcd's 1.5 MiB request limit as stored. A custom resource is stored
// as JSON, so its review is about 3 MiB (3,145,494 bytes); but a built-in kind
// written as protobuf is stored as such, and JSON writes each control
// character of its strings as a six-byte escape (\u0001): a Pod whose one
// argument is 1,571,840 such characters is sent as a review of 18,864,784
// bytes (17.99 MiB), 2 × 6 × 1.5 MiB and the review around them.
const DefaultMaxBodyBytes int64 = 19 << 20

// MutatePath is where the module's mutations are served.
func MutatePath(module string) string { return "/mutate/" + module }

// ValidatePath is where the module's validations are served.
func ValidatePath(module string) string { return "/validate/" + module }

// CanaryPath is where the registration's reachability canary is served.
func CanaryPath(module string) string { return "/canary/" + module }

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
}

// Lingering is how many requests were answered at their deadline while
// their bindings still run, holding their connections: a server stopping
// need not wait for them.
func (h *Handler) Lingering() int { return int(h.lingering.Load()) }

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
	h := &Handler{opts: opts, stores: map[string]store.Store{}, caps: map[string]bool{}, optOut: map[string]bool{}}
	for i := range bindings {
		b := &bindings[i]
		h.caps[b.Capability] = true
		if b.OptOut != "" {
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

// ServeHTTP serves the mutate, validate and canary paths. A request it
// cannot attribute — another path, or a kind and operation none of the
// path's bindings is for — is answered by the failure policy, or allowed
// while a newer version of the module is registered (see Options.Newer).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	review, status, err := h.decode(w, r)
	if err != nil {
		h.opts.Log.Info("admission request refused", "path", r.URL.Path, "status", status, "err", err.Error())
		http.Error(w, err.Error(), status)
		return
	}
	req := review.Request
	var resp *admissionv1.AdmissionResponse
	switch a := h.attribute(r.URL.Path, req); {
	case a.reason != "":
		resp = h.unattributed(r.Context(), r.URL.Path, req, a)
	case a.canary:
		resp = &admissionv1.AdmissionResponse{Allowed: true}
		if token := h.canary(req); token != "" {
			// Echoed to whoever sent the canary, whichever replica answers.
			resp.Warnings = []string{CanaryWarning(token)}
		}
	default:
		if rv, run := h.prepare(a.action, a.capability, req, false); len(run) > 0 {
			h.serveRun(w, r, rv, a.action, run)
			return
		}
		resp = &admissionv1.AdmissionResponse{Allowed: true}
	}
	h.answer(w, req.UID, resp, false)
}

// serveRun runs a request's bindings on the request's own goroutine — no
// handoff to another, which cost a thread's wakeup per request — and
// answers with what they decide. Should they outlast the deadline, a timer
// answers instead, by the failure policy, while they go on: the answer
// carries its length and Connection: close, so the API server has it whole
// and does not send its next request down a connection a hung binding
// still holds.
//
// The bindings' context carries the request's values and the deadline, not
// the request's cancellation: the API server waits longer than the deadline
// (timeoutSeconds is two seconds more), and tying every request's context
// to the connection's cost about a twentieth of a request's CPU.
func (h *Handler) serveRun(w http.ResponseWriter, r *http.Request, rv *reviewRun, action spec.Action, run []*spec.Binding) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), h.opts.Timeout)
	defer cancel()
	uid := rv.req.UID
	var mu sync.Mutex
	early, answered := false, false
	timer := time.AfterFunc(h.opts.Timeout, func() {
		mu.Lock()
		defer mu.Unlock()
		if !answered {
			early, answered = true, true
			h.lingering.Add(1)
			h.answer(w, uid, h.timedOut(rv), true)
		}
	})
	resp := rv.run(ctx, action, run)
	timer.Stop()
	mu.Lock()
	defer mu.Unlock()
	if early {
		h.lingering.Add(-1)
		return
	}
	answered = true
	h.answer(w, uid, resp, false)
}

// answer writes resp as the AdmissionReview answering uid. An answer written
// before the handler returns (early) is sent at once, with its length, and
// closes the connection after it.
func (h *Handler) answer(w http.ResponseWriter, uid types.UID, resp *admissionv1.AdmissionResponse, early bool) {
	resp.UID = uid
	buf := buffers.Get().(*[]byte)
	defer func() {
		if cap(*buf) <= 64<<10 {
			buffers.Put(buf)
		}
	}()
	data, err := encodeReview((*buf)[:0], resp)
	*buf = data
	if err != nil {
		h.opts.Log.Error(err, "encode admission response")
		http.Error(w, "encode the response: "+err.Error(), http.StatusInternalServerError)
		return
	}
	hdr := w.Header()
	hdr["Content-Type"] = jsonContentType
	if early {
		hdr.Set("Content-Length", strconv.Itoa(len(data)))
		hdr.Set("Connection", "close")
	}
	if _, err := w.Write(data); err != nil {
		h.opts.Log.V(1).Info("write admission response", "err", err.Error())
		return
	}
	if early {
		if err := http.NewResponseController(w).Flush(); err != nil {
			h.opts.Log.V(1).Info("flush admission response", "err", err.Error())
		}
	}
}

// jsonContentType is the answer's Content-Type header, shared.
var jsonContentType = []string{"application/json"}

// reviewTypeMeta is what an answer is: DecodeReview accepts only v1.
var reviewTypeMeta = metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}

// CanaryWarning is the warning a replica answers a canary with: the API
// server passes it back to the client that sent the canary, which is how a
// registering replica learns that the API server reaches the module — even
// when another replica answered.
func CanaryWarning(token string) string { return "vigil-canary " + token }

// canary returns the token of a canary ConfigMap.
func (h *Handler) canary(req *admissionv1.AdmissionRequest) string {
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := fastjson.Unmarshal(req.Object.Raw, &cm); err != nil {
		return ""
	}
	return cm.Data["token"]
}

// decode reads an AdmissionReview v1 request, or says what is wrong with it.
func (h *Handler) decode(w http.ResponseWriter, r *http.Request) (*admissionv1.AdmissionReview, int, error) {
	if r.Method != http.MethodPost {
		return nil, http.StatusMethodNotAllowed, fmt.Errorf("expected POST of an AdmissionReview, got %s", r.Method)
	}
	if ct, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || ct != "application/json" {
		return nil, http.StatusUnsupportedMediaType, fmt.Errorf("expected Content-Type application/json, got %q", r.Header.Get("Content-Type"))
	}
	var body []byte
	var err error
	if b, ok := r.Body.(interface{ Bytes() []byte }); ok && int64(len(b.Bytes())) <= h.opts.MaxBodyBytes {
		// Already read, within its limits, by the server: no second copy.
		body = b.Bytes()
	} else {
		body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, h.opts.MaxBodyBytes))
	}
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("expected an AdmissionReview of at most %d bytes, got more", h.opts.MaxBodyBytes)
		}
		return nil, http.StatusBadRequest, fmt.Errorf("read request body: %w", err)
	}
	review, err := DecodeReview(body)
	if err != nil {
		return nil, http.StatusBadRequest, err
	}
	return review, 0, nil
}

// DecodeReview decodes an AdmissionReview v1 with a request, or says what was
// expected and what was seen.
func DecodeReview(body []byte) (*admissionv1.AdmissionReview, error) {
	review := &admissionv1.AdmissionReview{}
	if err := unmarshalReview(body, review); err != nil {
		return nil, fmt.Errorf("expected a JSON AdmissionReview (admission.k8s.io/v1): %w", err)
	}
	if review.APIVersion != admissionv1.SchemeGroupVersion.String() || review.Kind != "AdmissionReview" {
		return nil, fmt.Errorf("expected apiVersion admission.k8s.io/v1 and kind AdmissionReview, got apiVersion %q kind %q: list only v1 in the webhook's admissionReviewVersions", review.APIVersion, review.Kind)
	}
	if review.Request == nil {
		return nil, errors.New("expected an AdmissionReview with a request, got none")
	}
	if review.Request.UID == "" {
		return nil, errors.New("expected the request to carry a uid, got none")
	}
	return review, nil
}

// Denial is a capability's validations' denial of an object, found by Audit.
type Denial struct {
	Capability, Message string
}

// Audit runs the validations over an object that already exists, as if it
// were created now, with the Store refusing writes: for the audit of what got
// in. Every validation judges as if enforced, whatever its capability's mode.
// It returns each capability's denial, in the order the capabilities' first
// validations were declared; none when the object passes.
func (h *Handler) Audit(ctx context.Context, req *admissionv1.AdmissionRequest) []Denial {
	dry := true
	req.DryRun = &dry
	var out []Denial
	seen := map[string]bool{}
	for _, b := range h.validate {
		if seen[b.Capability] {
			continue
		}
		seen[b.Capability] = true
		resp := h.review(ctx, spec.Validate, b.Capability, req, true)
		if !resp.Allowed && resp.Result != nil {
			out = append(out, Denial{Capability: b.Capability, Message: resp.Result.Message})
		}
	}
	return out
}

// prepare finds the bindings to run for one request: those served on the
// path of capability (see servedOn) whose kind, operation and filters match.
// enforce judges every validation as if its capability were in Enforce mode.
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

// review runs the bindings for one request, outside a webhook call (the
// audit's), under the handler's deadline: the answer comes by then, while
// a binding that ignores its context goes on.
func (h *Handler) review(ctx context.Context, action spec.Action, capability string, req *admissionv1.AdmissionRequest, enforce bool) *admissionv1.AdmissionResponse {
	rv, run := h.prepare(action, capability, req, enforce)
	if len(run) == 0 {
		return &admissionv1.AdmissionResponse{Allowed: true}
	}
	ctx, cancel := context.WithTimeout(ctx, h.opts.Timeout)
	defer cancel()
	done := make(chan *admissionv1.AdmissionResponse, 1)
	go func() { done <- rv.run(ctx, action, run) }()
	select {
	case resp := <-done:
		return resp
	case <-ctx.Done():
		return h.timedOut(rv)
	}
}

// timedOut answers for a run whose binding did not finish in time.
func (h *Handler) timedOut(rv *reviewRun) *admissionv1.AdmissionResponse {
	b := rv.current.Load()
	h.observe(b, "timeout", h.opts.Timeout)
	return h.failed(b, fmt.Errorf("did not finish within %s", h.opts.Timeout))
}

// reviewRun is one request's run through its bindings.
type reviewRun struct {
	h      *Handler
	req    *admissionv1.AdmissionRequest
	dryRun bool
	// enforce judges every validation as Enforce mode would: see Handler.Audit.
	enforce bool
	current atomic.Pointer[spec.Binding]
}

// input is what binding b's typed request is made of, besides its objects,
// and the context it runs in.
func (rv *reviewRun) input(ctx context.Context, b *spec.Binding) (context.Context, *spec.Call) {
	st := rv.h.stores[b.Capability]
	if rv.dryRun {
		st = dryRunStore{st}
	}
	if rv.h.opts.Context != nil {
		ctx = rv.h.opts.Context(ctx, st)
	}
	return ctx, &spec.Call{Raw: rv.req, Store: st}
}

func (rv *reviewRun) run(ctx context.Context, action spec.Action, bindings []*spec.Binding) *admissionv1.AdmissionResponse {
	objs := &objects{req: rv.req}
	if action == spec.Mutate {
		defer func() {
			if objs.orig != nil {
				objs.orig.release()
			}
		}()
		return rv.mutate(ctx, bindings, objs)
	}
	var warnings []string
	for _, b := range bindings {
		rv.current.Store(b)
		obj, old, err := objs.decode(b)
		var v admission.Verdict
		if err == nil {
			began := time.Now()
			v, err = rv.validate(ctx, b, obj, old)
			rv.h.observe(b, verdictLabel(v, err), time.Since(began))
		}
		if err != nil {
			resp := rv.h.failed(b, err)
			resp.Warnings = append(warnings, resp.Warnings...)
			return resp
		}
		warnings = append(warnings, v.Warnings()...)
		if !v.Allowed() && !rv.enforce && (b.Mode == spec.Warn || b.Mode == spec.Audit) {
			warnings = rv.unenforced(b, v, warnings)
			continue
		}
		if !v.Allowed() {
			return &admissionv1.AdmissionResponse{Allowed: false, Warnings: warnings, Result: &metav1.Status{
				Status: metav1.StatusFailure, Code: v.Code(), Message: v.Message(), Reason: reasonFor(v.Code()),
			}}
		}
	}
	return &admissionv1.AdmissionResponse{Allowed: true, Warnings: warnings}
}

// unenforced answers a denial of a binding whose capability is in Warn or
// Audit mode: the request is allowed, and the denial becomes a warning to
// the client (Warn) or a finding in the log (Audit); both are counted.
func (rv *reviewRun) unenforced(b *spec.Binding, v admission.Verdict, warnings []string) []string {
	if rv.h.opts.Metrics != nil {
		rv.h.opts.Metrics.unenforcedDenial(b)
	}
	if b.Mode == spec.Warn {
		return append(warnings, fmt.Sprintf("vigil module %s: capability %q binding %q would deny this (mode Warn, not enforced): %s", rv.h.opts.Module, b.Capability, b.Name, v.Message()))
	}
	r := rv.req
	events.Info(rv.h.opts.Log, events.AuditFinding, "a validation denied a request that its capability only audits: allowed, recorded as a finding",
		"capability", b.Capability, "binding", b.Name, "mode", string(b.Mode), "operation", string(r.Operation),
		"kind", r.Kind.Kind, "namespace", r.Namespace, "name", r.Name, "user", r.UserInfo.Username, "dryRun", rv.dryRun,
		"violation", v.Message())
	return warnings
}

// validate runs a validation, and once more on fresh data when its verdict
// rests on what the listers it read hold: see Options.Recheck.
func (rv *reviewRun) validate(ctx context.Context, b *spec.Binding, obj, old client.Object) (admission.Verdict, error) {
	once := func() (admission.Verdict, *fresh.Reads, error) {
		reads := rv.reads()
		v, err := call(func() (admission.Verdict, error) {
			ctx, in := rv.input(ctx, b)
			return b.Validate(callctx.WithReads(ctx, reads), obj, old, in)
		})
		return v, reads, err
	}
	v, reads, err := once()
	if err != nil || !rechecked(reads, !v.Allowed()) {
		return v, err
	}
	waited, err := rv.refresh(ctx, reads)
	if err != nil {
		rv.h.recheck(b, "failed", waited)
		return v, err
	}
	again, _, err := once()
	outcome := "same"
	if err != nil || again.Allowed() != v.Allowed() {
		outcome = "changed"
	}
	rv.h.recheck(b, outcome, waited)
	return again, err
}

// reads is a fresh record of lister reads, or nil when the handler does not
// recheck.
func (rv *reviewRun) reads() *fresh.Reads {
	if !rv.h.opts.Recheck {
		return nil
	}
	return &fresh.Reads{}
}

// rechecked reports whether a decision must be made again on fresh data: it
// read a lister, and it refused (refused) or a read found an object.
func rechecked(reads *fresh.Reads, refused bool) bool {
	if reads == nil || len(reads.Barriers()) == 0 {
		return false
	}
	return refused || reads.Found()
}

// refresh waits until the listers read have caught up with the API server.
func (rv *reviewRun) refresh(ctx context.Context, reads *fresh.Reads) (time.Duration, error) {
	began := time.Now()
	if err := fresh.WaitAll(ctx, reads.Barriers()); err != nil {
		return time.Since(began), fmt.Errorf("the decision rests on cached data that could not be confirmed fresh: %w", err)
	}
	return time.Since(began), nil
}

func (rv *reviewRun) mutate(ctx context.Context, bindings []*spec.Binding, objs *objects) *admissionv1.AdmissionResponse {
	for _, b := range bindings {
		rv.current.Store(b)
		obj, old, err := objs.decode(b)
		if err == nil {
			began := time.Now()
			err = rv.mutateOne(ctx, b, objs, obj, old)
			label := "mutated"
			if err != nil {
				label = "error"
			}
			rv.h.observe(b, label, time.Since(began))
		}
		if err != nil {
			// A failed mutation may have left half its edits: none are sent.
			return rv.h.failed(b, err)
		}
	}
	patch, err := objs.patch()
	if err != nil {
		return rv.h.failed(rv.current.Load(), err)
	}
	resp := &admissionv1.AdmissionResponse{Allowed: true}
	if len(patch) > 0 {
		pt := admissionv1.PatchTypeJSONPatch
		resp.Patch, resp.PatchType = patch, &pt
	}
	return resp
}

// mutateOne runs a mutation, and once more on fresh data, from the object as
// it was before, when its outcome rests on what the listers it read hold.
func (rv *reviewRun) mutateOne(ctx context.Context, b *spec.Binding, objs *objects, obj, old client.Object) error {
	var before client.Object
	if rv.h.opts.Recheck {
		before = obj.DeepCopyObject().(client.Object)
	}
	once := func(obj client.Object) (*fresh.Reads, error) {
		reads := rv.reads()
		_, err := call(func() (admission.Verdict, error) {
			ctx, in := rv.input(ctx, b)
			return admission.Verdict{}, b.Mutate(callctx.WithReads(ctx, reads), obj, old, in)
		})
		return reads, err
	}
	reads, err := once(obj)
	if !rechecked(reads, err != nil) {
		return err
	}
	waited, ferr := rv.refresh(ctx, reads)
	if ferr != nil {
		rv.h.recheck(b, "failed", waited)
		return ferr
	}
	objs.cur = before
	_, again := once(before)
	outcome := "same"
	if (again == nil) != (err == nil) {
		outcome = "changed"
	}
	rv.h.recheck(b, outcome, waited)
	return again
}

// call runs a binding's function, turning a panic into an error.
func call(fn func() (admission.Verdict, error)) (v admission.Verdict, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v\n%s", p, firstFrames(debug.Stack(), 12))
		}
	}()
	return fn()
}

func firstFrames(stack []byte, lines int) string {
	parts := strings.SplitN(string(stack), "\n", lines+1)
	if len(parts) > lines {
		parts = parts[:lines]
	}
	return strings.Join(parts, "\n")
}

// failed answers for a binding that failed, by the failure policy.
func (h *Handler) failed(b *spec.Binding, err error) *admissionv1.AdmissionResponse {
	id := "unknown"
	if b != nil {
		id = fmt.Sprintf("capability %q binding %q", b.Capability, b.Name)
	}
	msg := err.Error()
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i] // the stack goes to the log, not to the client
	}
	policy := h.opts.FailurePolicy
	if p, ok := h.opts.Policies[bindingCapability(b)]; ok {
		policy = p
	}
	h.opts.Log.Error(err, "admission binding failed", "binding", id, "failurePolicy", string(policy))
	if policy == admission.Ignore {
		return &admissionv1.AdmissionResponse{Allowed: true, Warnings: []string{
			fmt.Sprintf("vigil module %s: %s failed and was skipped (failurePolicy Ignore): %s", h.opts.Module, id, msg),
		}}
	}
	return &admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Reason: metav1.StatusReasonInternalError,
		Message: fmt.Sprintf("vigil module %s: %s failed (failurePolicy Fail): %s", h.opts.Module, id, msg),
	}}
}

func (h *Handler) observe(b *spec.Binding, verdict string, d time.Duration) {
	if h.opts.Metrics == nil || b == nil {
		return
	}
	h.opts.Metrics.observe(b, verdict, d)
}

func (h *Handler) recheck(b *spec.Binding, outcome string, wait time.Duration) {
	if h.opts.Metrics != nil {
		h.opts.Metrics.recheck(b, outcome, wait)
	}
}

func verdictLabel(v admission.Verdict, err error) string {
	switch {
	case err != nil:
		return "error"
	case !v.Allowed():
		return "denied"
	case len(v.Warnings()) > 0:
		return "warned"
	default:
		return "allowed"
	}
}

func reasonFor(code int32) metav1.StatusReason {
	switch code {
	case http.StatusForbidden:
		return metav1.StatusReasonForbidden
	case http.StatusBadRequest:
		return metav1.StatusReasonBadRequest
	case http.StatusUnprocessableEntity:
		return metav1.StatusReasonInvalid
	case http.StatusConflict:
		return metav1.StatusReasonConflict
	default:
		return ""
	}
}

// metaOnce decodes the object's metadata for filters, once, when first asked.
func metaOnce(req *admissionv1.AdmissionRequest) func() spec.Meta {
	var m *spec.Meta
	return func() spec.Meta {
		if m != nil {
			return *m
		}
		raw := req.Object.Raw
		if req.Operation == admissionv1.Delete || len(raw) == 0 {
			raw = req.OldObject.Raw
		}
		pom := &metav1.PartialObjectMetadata{}
		_ = json.Unmarshal(raw, pom)
		m = &spec.Meta{Namespace: req.Namespace, Object: pom}
		return *m
	}
}

// objects holds a request's objects as the bindings see them: decoded once
// into the Go type of the binding that needs them, carried from binding to
// binding with their edits, and turned into a JSON patch at the end.
type objects struct {
	req *admissionv1.AdmissionRequest

	cur, old client.Object
	// orig is the object as it came, decoded into the Go type of the first
	// mutation: see original.
	orig *original
}

// original keeps the object as it came, to make the patch against. A type
// with a protobuf encoding (every built-in kind) is kept encoded, labels and
// annotations apart: encoding it costs a fraction of a deep copy, and
// comparing two encodings a fraction of comparing two objects field by
// field (reflect.DeepEqual), which for a Pod took half of a mutation's CPU.
// Other types (unstructured objects) are kept as a copy.
type original struct {
	typ                 reflect.Type
	gvk                 schema.GroupVersionKind
	labels, annotations map[string]string
	proto               []byte
	protoBuf            *[]byte // proto's buffer, from protoBuffers: see release
	copy                client.Object
	// src is the JSON it was decoded from, to decode it again when the
	// patch is made by diffing.
	src []byte
}

// protoObject is a type with a protobuf encoding, as k8s.io/api generates
// them: deterministic (map keys sorted), so equal encodings are equal
// objects — but for a nil and an empty slice or map, which it does not tell
// apart and neither does the API server.
type protoObject interface {
	client.Object
	Size() int
	MarshalToSizedBuffer(dst []byte) (int, error)
}

// protoBuffers hold encodings for as long as a request needs them.
var protoBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// encodeProto encodes p into a buffer from protoBuffers, returned with it.
func encodeProto(p protoObject) ([]byte, *[]byte, error) {
	buf := protoBuffers.Get().(*[]byte)
	size := p.Size()
	if cap(*buf) < size {
		*buf = make([]byte, size)
	}
	data := (*buf)[:size]
	n, err := p.MarshalToSizedBuffer(data)
	return data[size-n:], buf, err
}

// putProto returns a buffer encodeProto took, unless it grew too large to
// keep.
func putProto(buf *[]byte) {
	if buf != nil && cap(*buf) <= 256<<10 {
		protoBuffers.Put(buf)
	}
}

func keep(obj client.Object, src []byte) (*original, error) {
	o := &original{typ: reflect.TypeOf(obj), gvk: obj.GetObjectKind().GroupVersionKind(), src: src,
		labels: maps.Clone(obj.GetLabels()), annotations: maps.Clone(obj.GetAnnotations())}
	if p, ok := obj.(protoObject); ok {
		data, buf, err := encodeProto(p)
		if err != nil {
			putProto(buf)
			return nil, err
		}
		o.proto, o.protoBuf = data, buf
		return o, nil
	}
	o.copy = obj.DeepCopyObject().(client.Object)
	return o, nil
}

// object is the object as it came.
func (o *original) object() (client.Object, error) {
	if o.copy != nil {
		return o.copy, nil
	}
	obj := reflect.New(o.typ.Elem()).Interface().(client.Object)
	if err := fastjson.Unmarshal(o.src, obj); err != nil {
		return nil, err
	}
	return obj, nil
}

// onlyMetadataChanged reports whether cur, of the original's type, differs
// from it in nothing but its labels and annotations.
func (o *original) onlyMetadataChanged(cur client.Object) bool {
	labels, annotations := cur.GetLabels(), cur.GetAnnotations()
	cur.SetLabels(o.labels)
	cur.SetAnnotations(o.annotations)
	defer func() {
		cur.SetLabels(labels)
		cur.SetAnnotations(annotations)
	}()
	if o.copy != nil {
		// reflect.DeepEqual may see a difference where there is none (a
		// Quantity whose string form was cached while reading it): that
		// only sends the edit down the slower, general path.
		return reflect.DeepEqual(cur, o.copy)
	}
	if cur.GetObjectKind().GroupVersionKind() != o.gvk {
		return false
	}
	data, buf, err := encodeProto(cur.(protoObject))
	defer putProto(buf)
	return err == nil && bytes.Equal(data, o.proto)
}

// release gives back the buffer of the original's encoding, once the patch
// is made.
func (o *original) release() {
	putProto(o.protoBuf)
	o.proto, o.protoBuf = nil, nil
}

func (o *objects) decode(b *spec.Binding) (obj, old client.Object, err error) {
	raw := o.req.Object.Raw
	if o.req.Operation == admissionv1.Delete {
		raw = o.req.OldObject.Raw
	}
	if o.cur == nil || !sameType(o.cur, b) {
		src := raw
		if o.cur != nil {
			// Another Go type edited the object before: carry its edits over.
			if src, err = json.Marshal(o.cur); err != nil {
				return nil, nil, err
			}
		}
		next := b.New()
		if err := fastjson.Unmarshal(src, next); err != nil {
			return nil, nil, fmt.Errorf("decode %s %s as %T: %w", o.req.Kind.Kind, o.req.Name, next, err)
		}
		o.cur = next
		if o.orig == nil && b.Action == spec.Mutate {
			if o.orig, err = keep(next, src); err != nil {
				return nil, nil, fmt.Errorf("keep %s %s as it came: %w", o.req.Kind.Kind, o.req.Name, err)
			}
		}
	}
	if len(o.req.OldObject.Raw) > 0 && o.req.Operation != admissionv1.Create {
		if o.old == nil || !sameType(o.old, b) {
			prev := b.New()
			if err := json.Unmarshal(o.req.OldObject.Raw, prev); err != nil {
				return nil, nil, fmt.Errorf("decode the old %s %s as %T: %w", o.req.Kind.Kind, o.req.Name, prev, err)
			}
			o.old = prev
		}
	}
	return o.cur, o.old, nil
}

func sameType(obj client.Object, b *spec.Binding) bool {
	return reflect.TypeOf(obj) == b.Type
}

// patch is the JSON patch from the object as it came to the object now.
func (o *objects) patch() ([]byte, error) {
	if o.cur == nil || o.orig == nil {
		return nil, nil
	}
	// Most mutations edit only labels and annotations: their patch is made
	// from the two maps instead of diffing the whole object.
	if reflect.TypeOf(o.cur) == o.orig.typ && o.orig.onlyMetadataChanged(o.cur) {
		ops := mapPatch(nil, "/metadata/labels", o.orig.labels, o.cur.GetLabels())
		ops = mapPatch(ops, "/metadata/annotations", o.orig.annotations, o.cur.GetAnnotations())
		if len(ops) == 0 {
			return nil, nil
		}
		return encodePatch(ops)
	}
	// Edits beyond labels and annotations: diff the two encodings. Both go
	// through the Go type, so fields it encodes differently from the API
	// server (a null creationTimestamp, say) are not patched.
	orig, err := o.orig.object()
	if err != nil {
		return nil, err
	}
	normalized, err := json.Marshal(orig)
	if err != nil {
		return nil, err
	}
	final, err := json.Marshal(o.cur)
	if err != nil {
		return nil, err
	}
	if bytes.Equal(final, normalized) {
		return nil, nil
	}
	ops, err := jsonpatch.CreatePatch(normalized, final)
	if err != nil {
		return nil, fmt.Errorf("compute the patch: %w", err)
	}
	if len(ops) == 0 {
		return nil, nil
	}
	return json.Marshal(ops)
}

func mapPatch(ops []jsonpatch.Operation, path string, before, after map[string]string) []jsonpatch.Operation {
	switch {
	case len(before) == 0 && len(after) == 0:
		return ops
	case len(before) == 0:
		return append(ops, jsonpatch.Operation{Operation: "add", Path: path, Value: after})
	case len(after) == 0:
		return append(ops, jsonpatch.Operation{Operation: "remove", Path: path})
	}
	keys := make([]string, 0, len(after))
	for k := range after {
		keys = append(keys, k)
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		p := path + "/" + pointerEscape.Replace(k)
		old, had := before[k]
		v, has := after[k]
		switch {
		case has && !had:
			ops = append(ops, jsonpatch.Operation{Operation: "add", Path: p, Value: v})
		case has && v != old:
			ops = append(ops, jsonpatch.Operation{Operation: "replace", Path: p, Value: v})
		case !has:
			ops = append(ops, jsonpatch.Operation{Operation: "remove", Path: p})
		}
	}
	return ops
}

// pointerEscape escapes a JSON pointer segment (RFC 6901).
var pointerEscape = strings.NewReplacer("~", "~0", "/", "~1")

// noStore is the Store of a module that has none.
type noStore struct{}

var errNoStore = errors.New("this module has no Store")

func (noStore) Get(string) (string, bool, error)          { return "", false, errNoStore }
func (noStore) Keys() ([]string, error)                   { return nil, errNoStore }
func (noStore) Set(context.Context, string, string) error { return errNoStore }
func (noStore) Update(context.Context, string, func(string, bool) (string, error)) error {
	return errNoStore
}
func (noStore) Remove(context.Context, string) error             { return errNoStore }
func (noStore) SetAndWait(context.Context, string, string) error { return errNoStore }
func (noStore) RemoveAndWait(context.Context, string) error      { return errNoStore }
func (noStore) Subscribe(func(store.Change)) (func(), error)     { return func() {}, errNoStore }
func (noStore) WaitForSync(context.Context) error                { return nil }
func (noStore) Module() store.Reader                             { return noStore{} }

func bindingCapability(b *spec.Binding) string {
	if b == nil {
		return ""
	}
	return b.Capability
}
