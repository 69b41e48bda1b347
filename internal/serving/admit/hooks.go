package admit

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
)

// The author's hooks around every request (spec.Hooks): Before as it
// arrives, After once it is answered. A panic in one is logged and goes no
// further: the request is answered as if the hook had not run.

// hookContext is the hooks' context: the role's values, without a Store,
// and the role's logger.
func (h *Handler) hookContext(ctx context.Context) context.Context {
	if h.opts.Context != nil {
		ctx = h.opts.Context(ctx, nil)
	}
	return logr.NewContext(ctx, h.opts.Log)
}

// before runs the Before hook, if any, on req.
func (h *Handler) before(ctx context.Context, req *admissionv1.AdmissionRequest) {
	if fn := h.opts.Hooks.Before; fn != nil {
		defer h.hookPanic("Before", req)
		fn(h.hookContext(ctx), req)
	}
}

// after runs the After hook, if any, on req's answer resp, given began.
func (h *Handler) after(ctx context.Context, req *admissionv1.AdmissionRequest, resp *admissionv1.AdmissionResponse, began time.Time) {
	if fn := h.opts.Hooks.After; fn != nil {
		defer h.hookPanic("After", req)
		fn(h.hookContext(ctx), req, resp, time.Since(began))
	}
}

func (h *Handler) hookPanic(which string, req *admissionv1.AdmissionRequest) {
	if v := recover(); v != nil {
		h.opts.Log.Error(fmt.Errorf("%v", v), "the module's admission hook panicked; the request is answered as if it had not run",
			"hook", which, "uid", req.UID, "kind", req.Kind.Kind, "namespace", req.Namespace, "name", req.Name)
	}
}
