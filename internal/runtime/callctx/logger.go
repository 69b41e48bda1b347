package callctx

import (
	"context"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
)

// Admission is the admission request a handler runs for, for its logger:
// the capability, the binding running (Binding, read when the handler logs)
// and the request.
type Admission struct {
	// Log is the admission role's logger, with the module.
	Log        logr.Logger
	Capability string
	Binding    func() string
	Request    *admissionv1.AdmissionRequest
}

type admissionKey struct{}

// WithAdmission gives ctx, an admission handler's, the request it runs for.
func WithAdmission(ctx context.Context, a *Admission) context.Context {
	return context.WithValue(ctx, admissionKey{}, a)
}

// Logger is the logger of the handler or callback ctx runs: the role's,
// with the module; in a watch handler, its binding and object (the watcher
// puts them in); in an admission handler, its capability, binding and
// request, added here when the handler asks for it, so that a handler that
// does not log costs nothing.
func Logger(ctx context.Context) logr.Logger {
	log := logr.FromContextOrDiscard(ctx)
	a, _ := ctx.Value(admissionKey{}).(*Admission)
	if a == nil {
		return log
	}
	if a.Log.GetSink() != nil {
		log = a.Log
	}
	kv := []any{"capability", a.Capability}
	if a.Binding != nil {
		kv = append(kv, "binding", a.Binding())
	}
	if r := a.Request; r != nil {
		kv = append(kv, "operation", r.Operation, "kind", r.Kind.Kind, "namespace", r.Namespace, "name", r.Name, "uid", r.UID, "user", r.UserInfo.Username)
		if r.SubResource != "" {
			kv = append(kv, "subresource", r.SubResource)
		}
	}
	return log.WithValues(kv...)
}
