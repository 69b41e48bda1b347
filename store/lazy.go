package store

import (
	"context"
	"sync"

	"k8s.io/client-go/rest"
)

// Lazy is a Store that connects on first use, so that gate callbacks and
// handlers that never touch the Store need neither its CRD nor the RBAC for
// it. Every method that meets a failed connection returns its error; a failed
// connection is tried again on the next use. Its scopes share the connection.
type Lazy struct {
	*lazyConn
	scope string
}

type lazyConn struct {
	ctx  context.Context
	cfg  *rest.Config
	opts Options

	mu      sync.Mutex
	started *Client // started, perhaps not synced yet
	c       *Client // started and synced
}

var _ Store = (*Lazy)(nil)

// NewLazy returns a Store of the module opts names that connects when it is
// first used; the connection lives until ctx ends.
func NewLazy(ctx context.Context, cfg *rest.Config, opts Options) *Lazy {
	return &Lazy{lazyConn: &lazyConn{ctx: ctx, cfg: cfg, opts: opts}}
}

// Module is the lazy module-wide Store.
func (l *Lazy) Module() Reader { return &Lazy{lazyConn: l.lazyConn} }

// Scope is the lazy Store of one capability.
func (l *Lazy) Scope(capability string) *Lazy {
	return &Lazy{lazyConn: l.lazyConn, scope: capability}
}

// connect starts the client once and waits for its first sync, within ctx.
func (l *lazyConn) connect(ctx context.Context) (*Client, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.c != nil {
		return l.c, nil
	}
	c := l.started
	if c == nil {
		var err error
		if c, err = New(l.cfg, l.opts); err != nil {
			return nil, err
		}
		if err := c.Start(l.ctx); err != nil {
			return nil, err
		}
		l.started = c
	}
	if err := c.WaitForSync(ctx); err != nil {
		return nil, err
	}
	l.c = c
	return c, nil
}

func (l *Lazy) get(ctx context.Context) (Store, error) {
	c, err := l.connect(ctx)
	if err != nil {
		return nil, err
	}
	if l.scope == "" {
		return c, nil
	}
	return c.Scope(l.scope), nil
}

func (l *Lazy) Get(key string) (string, bool, error) {
	s, err := l.get(l.ctx)
	if err != nil {
		return "", false, err
	}
	return s.Get(key)
}

func (l *Lazy) Keys() ([]string, error) {
	s, err := l.get(l.ctx)
	if err != nil {
		return nil, err
	}
	return s.Keys()
}

func (l *Lazy) Set(ctx context.Context, key, value string) error {
	s, err := l.get(ctx)
	if err != nil {
		return err
	}
	return s.Set(ctx, key, value)
}

func (l *Lazy) Update(ctx context.Context, key string, fn func(string, bool) (string, error)) error {
	s, err := l.get(ctx)
	if err != nil {
		return err
	}
	return s.Update(ctx, key, fn)
}

func (l *Lazy) Remove(ctx context.Context, key string) error {
	s, err := l.get(ctx)
	if err != nil {
		return err
	}
	return s.Remove(ctx, key)
}

func (l *Lazy) SetAndWait(ctx context.Context, key, value string) error {
	s, err := l.get(ctx)
	if err != nil {
		return err
	}
	return s.SetAndWait(ctx, key, value)
}

func (l *Lazy) RemoveAndWait(ctx context.Context, key string) error {
	s, err := l.get(ctx)
	if err != nil {
		return err
	}
	return s.RemoveAndWait(ctx, key)
}

func (l *Lazy) Subscribe(fn func(Change)) (func(), error) {
	s, err := l.get(l.ctx)
	if err != nil {
		return func() {}, err
	}
	return s.Subscribe(fn)
}

func (l *Lazy) SubscribeBatch(fn func([]Change)) (func(), error) {
	s, err := l.get(l.ctx)
	if err != nil {
		return func() {}, err
	}
	return s.SubscribeBatch(fn)
}

func (l *Lazy) Clear(ctx context.Context) error {
	s, err := l.get(ctx)
	if err != nil {
		return err
	}
	return s.Clear(ctx)
}

func (l *Lazy) WaitForSync(ctx context.Context) error {
	_, err := l.get(ctx)
	return err
}
