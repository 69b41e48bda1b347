package vigil

import (
	"context"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/internal/definition/define"
	"github.com/vigilkit/vigil/internal/runtime/callctx"
	"github.com/vigilkit/vigil/store"
)

// StoreFrom returns the Store a gate callback or handler was called with, in
// every role: its capability's scope for an admission, OnEvent, Reconcile or
// Finalize handler, the module-wide scope for gate callbacks, Sample
// functions and schedules. A handler reads the module-wide scope, where gate
// callbacks keep what they found, with StoreFrom(ctx).Module(). A dry-run admission request gets a Store that
// refuses writes. It returns nil outside the functions vigil calls (see
// ClientFrom).
func StoreFrom(ctx context.Context) Store {
	return callctx.Store(ctx)
}

// OnStoreReady calls fn in every admission and watcher replica of the
// module once its module-wide Store holds the state of its first list, as
// Pepr's Store.onReady: to log what the module starts from, or to prepare
// what its handlers read. It runs beside the role: an admission replica's
// Store is synced before it serves, while a watcher's handlers may run
// before fn returns. ctx is a handler's (ClientFrom, LoggerFrom and
// StoreFrom work); a panic is logged.
func (m *Module) OnStoreReady(fn func(ctx context.Context, s Store)) {
	m.d.AddStoreReady(define.Caller(), fn)
}

// StoreReader reads a Store: what a Store's Module returns.
type StoreReader = store.Reader

// ClientFrom returns a client of the API server as the role's process reaches
// it (its --kubeconfig, or the pod's ServiceAccount), for what handlers do
// beyond vigil; reads are not cached (use a Lister), and RBAC declares what it
// may do. ClientFrom, ConfigFrom and StoreFrom work in every function vigil
// calls — Sample functions, gate callbacks and OnTimeout fallbacks; Mutate and
// Validate; OnEvent, Reconcile, Finalize and OnSchedule — and return nil
// anywhere else.
func ClientFrom(ctx context.Context) client.Client { return callctx.Client(ctx) }

// ConfigFrom returns the rest config the role's process runs with, for
// clients of other kinds; nil outside the functions vigil calls (see ClientFrom).
func ConfigFrom(ctx context.Context) *rest.Config { return callctx.Config(ctx) }

// LoggerFrom returns the logger of the function vigil called, which writes
// as vigil's own lines do: the module's, with the binding and the object in
// a watch handler, and in an admission handler the capability, the binding
// and the request (operation, kind, namespace, name, uid, user). Anywhere
// else it is the logger ctx carries, or one that discards. The default slog
// logger writes through the same sink once the module runs.
func LoggerFrom(ctx context.Context) logr.Logger {
	return callctx.Logger(ctx)
}
