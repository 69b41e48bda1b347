package callctx

import (
	"context"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/internal/serving/fresh"
	"github.com/vigilkit/vigil/store"
)

// Role is what one role's process hands every callback and handler: its API
// access and the module-wide Store.
type Role struct {
	Config *rest.Config
	Scheme *runtime.Scheme
	// Module is the module-wide scope of the Store.
	Module store.Store
	// Scope returns a capability's scope of the Store; Module when nil.
	Scope func(capability string) store.Store

	once   sync.Once
	client client.Client
	err    error
	cache  atomic.Pointer[cache]
}

// cache is what the module's listers read in a role that started one.
type cache struct {
	reader   client.Reader
	barriers fresh.Set
}

// SetCache gives the role's listers its started informer cache and, in the
// admission role, the barriers that catch it up (nil elsewhere).
func (r *Role) SetCache(reader client.Reader, barriers fresh.Set) {
	r.cache.Store(&cache{reader: reader, barriers: barriers})
}

// Cache is the role's started informer cache and its barriers; a nil reader
// before the role started one, or in a role that has none.
func (r *Role) Cache() (client.Reader, fresh.Set) {
	if r == nil {
		return nil, nil
	}
	if c := r.cache.Load(); c != nil {
		return c.reader, c.barriers
	}
	return nil, nil
}

// Client is a client of the API server made from Config on first use.
func (r *Role) Client() (client.Client, error) {
	r.once.Do(func() { r.client, r.err = client.New(r.Config, client.Options{Scheme: r.Scheme}) })
	return r.client, r.err
}

type call struct {
	role  *Role
	store store.Store
}

type key struct{}

// ScopeOf is capability's scope of the Store; the module-wide one for "".
func (r *Role) ScopeOf(capability string) store.Store {
	if capability != "" && r.Scope != nil {
		return r.Scope(capability)
	}
	return r.Module
}

// With gives ctx the role's values, with s as the call's own Store.
func With(ctx context.Context, r *Role, s store.Store) context.Context {
	return context.WithValue(ctx, key{}, &call{role: r, store: s})
}

// Store is the call's own Store; nil outside a callback or handler.
func Store(ctx context.Context) store.Store {
	if c, _ := ctx.Value(key{}).(*call); c != nil {
		return c.store
	}
	return nil
}

// RoleOf is the role's values; nil outside a callback or handler.
func RoleOf(ctx context.Context) *Role {
	if c, _ := ctx.Value(key{}).(*call); c != nil {
		return c.role
	}
	return nil
}

// Client is the handler's client of the API server, made from its role's
// Config on first use; nil outside a callback or handler, or when it cannot
// be made.
func Client(ctx context.Context) client.Client {
	r := RoleOf(ctx)
	if r == nil {
		return nil
	}
	c, err := r.Client()
	if err != nil {
		return nil
	}
	return c
}

// Config is a copy of the handler's role's config of the API server; nil
// outside a callback or handler, or in a case run in process.
func Config(ctx context.Context) *rest.Config {
	if r := RoleOf(ctx); r != nil && r.Config != nil {
		return rest.CopyConfig(r.Config)
	}
	return nil
}

// Reader is what a handler reads the API server through: its client, or,
// where the role has no config (a case run in process), the objects its
// cache holds; nil outside a callback or handler.
func Reader(ctx context.Context) client.Reader {
	if c := Client(ctx); c != nil {
		return c
	}
	if r := RoleOf(ctx); r != nil && r.Config == nil {
		reader, _ := r.Cache()
		return reader
	}
	return nil
}

type readsKey struct{}

// WithReads gives ctx the record of one admission binding's lister reads.
func WithReads(ctx context.Context, r *fresh.Reads) context.Context {
	return context.WithValue(ctx, readsKey{}, r)
}

// Reads is the record of lister reads in ctx; nil outside an admission
// binding's run, where nothing is recorded.
func Reads(ctx context.Context) *fresh.Reads {
	r, _ := ctx.Value(readsKey{}).(*fresh.Reads)
	return r
}

// handoffDirs are the handoff folders of the roles running in this process,
// by module name.
var handoffDirs sync.Map

// SetHandoffDir records the folder the running role of a module reads its
// gates' results in (its --handoff-dir), until the role ends and calls
// unset: a role's state ends with the role, so a later reader in the same
// process (a test that runs a gate phase with another folder) is not sent to
// this one.
func SetHandoffDir(module, dir string) (unset func()) {
	handoffDirs.Store(module, dir)
	return func() { handoffDirs.CompareAndDelete(module, dir) }
}

// HandoffDir is the folder the running role of a module reads its gates'
// results in; empty when no role of the module runs in this process.
func HandoffDir(module string) string {
	dir, _ := handoffDirs.Load(module)
	s, _ := dir.(string)
	return s
}
