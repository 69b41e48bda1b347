package callctx

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/go-logr/logr"

	"github.com/vigilkit/vigil/store"
)

// StoreReady calls each of a module's OnStoreReady functions, in order, once
// s (its module-wide Store) holds the state of its first list, each with
// ctx (a handler's context of the role: its client, Store and logger). A
// panic is logged with its stack and the next runs; ctx ending first runs
// none. It returns once all have run: call it in a goroutine of its own.
func StoreReady(ctx context.Context, s store.Store, fns []func(context.Context, store.Store), log logr.Logger) {
	if len(fns) == 0 {
		return
	}
	if err := s.WaitForSync(ctx); err != nil {
		if ctx.Err() == nil {
			log.Error(err, "the module's Store did not sync: its OnStoreReady functions did not run")
		}
		return
	}
	for i, fn := range fns {
		func() {
			defer func() {
				if p := recover(); p != nil {
					log.Error(fmt.Errorf("%v", p), "OnStoreReady function panicked", "index", i, "stack", string(debug.Stack()))
				}
			}()
			fn(ctx, s)
		}()
	}
}
