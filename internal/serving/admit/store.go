package admit

import (
	"context"
	"errors"

	"github.com/vigilkit/vigil/store"
)

// ErrDryRun refuses a Store write made while admitting a dry-run request:
// the webhooks declare no side effects.
var ErrDryRun = errors.New("store writes are refused while admitting a dry-run request: the webhook declares sideEffects None; check req.DryRun before writing")

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
func (noStore) Clear(context.Context) error                      { return errNoStore }
func (noStore) SubscribeBatch(func([]store.Change)) (func(), error) {
	return func() {}, errNoStore
}
func (noStore) Module() store.Reader { return noStore{} }

// dryRunStore refuses writes: see ErrDryRun.
type dryRunStore struct{ store.Store }

func (dryRunStore) Set(context.Context, string, string) error { return ErrDryRun }
func (dryRunStore) Update(context.Context, string, func(string, bool) (string, error)) error {
	return ErrDryRun
}
func (dryRunStore) Remove(context.Context, string) error             { return ErrDryRun }
func (dryRunStore) SetAndWait(context.Context, string, string) error { return ErrDryRun }
func (dryRunStore) RemoveAndWait(context.Context, string) error      { return ErrDryRun }
func (dryRunStore) Clear(context.Context) error                      { return ErrDryRun }
func (d dryRunStore) SubscribeBatch(fn func([]store.Change)) (func(), error) {
	return d.Store.SubscribeBatch(fn)
}
func (d dryRunStore) Subscribe(fn func(store.Change)) (func(), error) { return d.Store.Subscribe(fn) }
func (d dryRunStore) WaitForSync(ctx context.Context) error           { return d.Store.WaitForSync(ctx) }
func (d dryRunStore) Get(key string) (string, bool, error)            { return d.Store.Get(key) }
func (d dryRunStore) Keys() ([]string, error)                         { return d.Store.Keys() }
