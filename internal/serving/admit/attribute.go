package admit

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/definition/spec"
)

// Reasons a request is unattributed, as the metric's reason label says.
const (
	// UnattributedPath: the request came for a path the module does not
	// serve.
	UnattributedPath = "path"
	// UnattributedKind: the path is served, but no binding of its action is
	// for the request's kind and operation.
	UnattributedKind = "kind"
)

// Answers to an unattributed request, as the metric's answer label says.
const (
	// AnswerRollout: allowed, because a newer version of the module
	// registered the webhook configurations and serves what this one does
	// not.
	AnswerRollout = "newer_version"
	// AnswerFailurePolicy: answered by the module's failure policy.
	AnswerFailurePolicy = "failure_policy"
)

// attribution says what a request is for: the canary, a review of an
// action, or — reason set — nothing this version serves, with what it
// expected instead.
type attribution struct {
	canary bool
	action spec.Action
	// capability is the capability whose own path the request came on;
	// "" on the shared paths.
	capability string
	reason     string
	expected   string
}

// attribute finds what a request is for from its path, kind and operation.
// A binding's filters (namespaces, names, labels) are not consulted: a
// request they do not match is attributed, and allowed by review.
func (h *Handler) attribute(path string, req *admissionv1.AdmissionRequest) attribution {
	switch path {
	case CanaryPath(h.opts.Module):
		if req.Kind.Group == "" && req.Kind.Version == "v1" && req.Kind.Kind == "ConfigMap" {
			return attribution{canary: true}
		}
		return attribution{reason: UnattributedKind, expected: "a ConfigMap (v1), the registration's canary"}
	case MutatePath(h.opts.Module):
		return h.attributeTo(spec.Mutate, "", h.mutate, req)
	case ValidatePath(h.opts.Module):
		return h.attributeTo(spec.Validate, "", h.validate, req)
	}
	if action, capability := h.ownPath(path); action != "" {
		bindings := h.validate
		if action == spec.Mutate {
			bindings = h.mutate
		}
		return h.attributeTo(action, capability, bindings, req)
	}
	return attribution{reason: UnattributedPath, expected: fmt.Sprintf("%s, %s or %s",
		MutatePath(h.opts.Module), ValidatePath(h.opts.Module), CanaryPath(h.opts.Module))}
}

// attributeTo attributes a request on the path of capability ("" for the
// shared path) to the action's bindings served there.
func (h *Handler) attributeTo(action spec.Action, capability string, all []*spec.Binding, req *admissionv1.AdmissionRequest) attribution {
	var bindings []*spec.Binding
	for _, b := range all {
		if h.servedOn(b, capability) {
			bindings = append(bindings, b)
		}
	}
	for _, b := range bindings {
		if serves(b, req) {
			return attribution{action: action, capability: capability}
		}
	}
	return attribution{action: action, capability: capability, reason: UnattributedKind, expected: served(action, bindings)}
}

// served describes what the action's bindings are for: "CREATE, UPDATE of
// Pod (v1); CREATE of Widget (example.dev/v1)".
func served(action spec.Action, bindings []*spec.Binding) string {
	var order []schema.GroupVersionKind
	ops := map[schema.GroupVersionKind][]string{}
	for _, b := range bindings {
		if _, ok := ops[b.GVK]; !ok {
			order = append(order, b.GVK)
			ops[b.GVK] = []string{}
		}
		if len(b.Operations) == 0 {
			ops[b.GVK] = append(ops[b.GVK], "any operation")
		}
		for _, op := range b.Operations {
			ops[b.GVK] = append(ops[b.GVK], string(op))
		}
	}
	if len(order) == 0 {
		noun := "mutations"
		if action == spec.Validate {
			noun = "validations"
		}
		return "nothing: this version of the module has no " + noun
	}
	parts := make([]string, 0, len(order))
	for _, gvk := range order {
		o := ops[gvk]
		slices.Sort(o)
		parts = append(parts, strings.Join(slices.Compact(o), ", ")+" of "+kindName(metav1.GroupVersionKind(gvk)))
	}
	return strings.Join(parts, "; ")
}

func kindName(k metav1.GroupVersionKind) string {
	gv := k.Version
	if k.Group != "" {
		gv = k.Group + "/" + k.Version
	}
	return fmt.Sprintf("%s (%s)", k.Kind, gv)
}

// unattributed answers a request this version cannot attribute: allowed
// while a newer version of the module is registered (a rollout, in which
// this replica receives what only the newer one serves), else by the
// failure policy. Either way it is logged and counted.
func (h *Handler) unattributed(ctx context.Context, path string, req *admissionv1.AdmissionRequest, a attribution) *admissionv1.AdmissionResponse {
	what := fmt.Sprintf("%s of %s", req.Operation, kindName(req.Kind))
	if req.Name != "" {
		what += " " + req.Name
	}
	var msg string
	if a.reason == UnattributedPath {
		msg = fmt.Sprintf("vigil module %s does not serve path %s (request for %s): expected %s", h.opts.Module, path, what, a.expected)
	} else {
		msg = fmt.Sprintf("vigil module %s has no binding at %s for %s: expected %s", h.opts.Module, path, what, a.expected)
	}
	if h.opts.Newer != nil {
		ctx, cancel := context.WithTimeout(ctx, h.opts.Timeout)
		newer, err := h.opts.Newer(ctx)
		cancel()
		if err != nil {
			h.opts.Log.Error(err, "tell whether a newer module version registered the webhooks", "path", path)
		}
		if err == nil && newer != "" {
			h.count(a.reason, AnswerRollout)
			h.opts.Log.Info("admission request this version does not serve; allowed: a newer version is registered", "newerVersion", newer, "reason", a.reason, "detail", msg)
			return &admissionv1.AdmissionResponse{Allowed: true}
		}
	}
	h.count(a.reason, AnswerFailurePolicy)
	h.opts.Log.Info("admission request this version does not serve; answered by the failure policy", "failurePolicy", string(h.opts.FailurePolicy), "reason", a.reason, "detail", msg)
	if h.opts.FailurePolicy == admission.Ignore {
		return &admissionv1.AdmissionResponse{Allowed: true, Warnings: []string{msg + " (failurePolicy Ignore: allowed)"}}
	}
	return &admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Reason: metav1.StatusReasonInternalError,
		Message: msg + " (failurePolicy Fail)",
	}}
}
