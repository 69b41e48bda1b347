package vigil

import (
	"context"

	"github.com/vigilkit/vigil/store"
)

type storeKey struct{}

type moduleStoreKey struct{}

// StoreFrom returns the Store a Watch, Reconcile, Finalize or OnSchedule
// handler was called with: its capability's scope (the module-wide scope for
// schedules). It returns nil outside such handlers.
func StoreFrom(ctx context.Context) Store {
	s, _ := ctx.Value(storeKey{}).(Store)
	return s
}

// StoreReader reads a Store.
type StoreReader = store.Reader

// ModuleStore returns the module-wide scope of the Store — where gate
// callbacks keep what they found — for reading from a handler of any role,
// whose own Store is its capability's scope. It returns nil outside gate
// callbacks and handlers.
func ModuleStore(ctx context.Context) StoreReader {
	s, _ := ctx.Value(moduleStoreKey{}).(StoreReader)
	return s
}

func withModuleStore(ctx context.Context, s StoreReader) context.Context {
	return context.WithValue(ctx, moduleStoreKey{}, s)
}
