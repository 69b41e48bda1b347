package admit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vigilkit/vigil/internal/definition/spec"
)

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

// Lingering is how many requests were answered at their deadline while
// their bindings still run, holding their connections: a server stopping
// need not wait for them.
func (h *Handler) Lingering() int { return int(h.lingering.Load()) }

// ServeHTTP serves the mutate, validate and canary paths. A request it
// cannot attribute — another path, or a kind and operation none of the
// path's bindings is for — is answered by the failure policy, or allowed
// while a newer version of the module is registered (see Options.Newer).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	review, status, err := h.read(w, r)
	if err != nil {
		h.opts.Log.Info("admission request refused", "path", r.URL.Path, "status", status, "err", err.Error())
		http.Error(w, err.Error(), status)
		return
	}
	req := review.Request
	var resp *admissionv1.AdmissionResponse
	a := h.attribute(r.URL.Path, req)
	began := time.Now()
	if !a.canary {
		h.before(r.Context(), req)
	}
	switch {
	case a.reason != "":
		resp = h.unattributed(r.Context(), r.URL.Path, req, a)
	case a.canary:
		resp = h.canary(req)
	default:
		if rv, run := h.prepare(a.action, a.capability, req, false); len(run) > 0 {
			h.serveRun(w, r, rv, a.action, run)
			return
		}
		resp = &admissionv1.AdmissionResponse{Allowed: true}
	}
	h.answer(w, req.UID, resp, false)
	if !a.canary {
		h.after(r.Context(), req, resp, began)
	}
}

// serveRun reviews a request (reviewRun.review) on the request's own goroutine — no
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
	began := time.Now()
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
			resp := h.timedOut(rv)
			h.answer(w, uid, resp, true)
			h.decisions.decided(rv.req, rv.current.Load(), resp, began)
			h.after(r.Context(), rv.req, resp, began)
		}
	})
	resp := rv.review(ctx, action, run)
	timer.Stop()
	mu.Lock()
	defer mu.Unlock()
	if early {
		h.lingering.Add(-1)
		return
	}
	answered = true
	h.answer(w, uid, resp, false)
	h.decisions.decided(rv.req, rv.current.Load(), resp, began)
	h.after(r.Context(), rv.req, resp, began)
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

// read reads an AdmissionReview v1 request within the body limit and decodes
// it (DecodeReview), or says what is wrong with it and with which status.
func (h *Handler) read(w http.ResponseWriter, r *http.Request) (*admissionv1.AdmissionReview, int, error) {
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
