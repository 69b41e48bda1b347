package audit

import (
	"context"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"

	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/serving/admit"
	"github.com/vigilkit/vigil/store"
)

// New is the audit of module m: its validations judge the existing
// objects as its admission role judges requests, each in a context
// withCall gives (what a handler's context carries), with scope its
// capability's Store, where each run also keeps its Report.
func New(m *spec.Module, cfg *rest.Config, log logr.Logger, scope func(capability string) store.Store, withCall func(context.Context, store.Store) context.Context) *Auditor {
	h := admit.NewHandler(m.Bindings, admit.Options{
		Module:        m.Name,
		FailurePolicy: m.FailurePolicy,
		Policies:      m.Policies(),
		Timeout:       m.BindingTimeout(),
		Store:         scope,
		Context:       withCall,
		Log:           log,
	})
	return &Auditor{Module: m, Handler: h, Config: cfg, Log: log, Store: scope}
}
