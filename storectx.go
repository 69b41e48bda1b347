package vigil

import (
	"context"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/internal/callctx"
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

// StoreReader reads a Store: what a Store's Module returns.
type StoreReader = store.Reader

// ClientFrom returns a client of the API server as the role's process reaches
// it (its --kubeconfig, or the pod's ServiceAccount), for what the functions
// vigil calls do beyond vigil: read a remote's state, patch a status, create
// an object. Reads go to the API server, not a cache (use a Lister for that).
// Declare what it is used for with RBAC. It is nil when no client can be made
// from the role's config.
//
// ClientFrom, ConfigFrom and StoreFrom read the context of
// every function vigil calls for a module, in each role:
//
//   - gate role: the functions a Sample polls, gate callbacks (ToBeCreated,
//     Then, ...), and OnTimeout fallbacks;
//   - admission role: Mutate and Validate handlers;
//   - watcher role: OnEvent, Reconcile and Finalize handlers, and OnSchedule
//     functions.
//
// Anywhere else — main, a module's definition, a goroutine started with a
// context of its own — they return nil.
func ClientFrom(ctx context.Context) client.Client {
	r := callctx.RoleOf(ctx)
	if r == nil {
		return nil
	}
	c, err := r.Client()
	if err != nil {
		return nil
	}
	return c
}

// ConfigFrom returns the rest config the role's process runs with, for
// clients of other kinds; nil outside the functions vigil calls (see ClientFrom).
func ConfigFrom(ctx context.Context) *rest.Config {
	r := callctx.RoleOf(ctx)
	if r == nil {
		return nil
	}
	return rest.CopyConfig(r.Config)
}
