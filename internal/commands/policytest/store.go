package policytest

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/vigilkit/vigil/store"
)

// memory is a Store held in memory for one case: its keys as the Store
// object holds them ("key" module-wide, "<capability>/key" in a
// capability's scope). Writes succeed and are kept for the case.
type memory struct {
	mu   sync.Mutex
	data map[string]string
}

func newMemory(keys map[string]string) *memory {
	m := &memory{data: map[string]string{}}
	for k, v := range keys {
		m.data[k] = v
	}
	return m
}

// scope is the view of one capability's keys ("" for the module-wide).
func (m *memory) scope(capability string) store.Store {
	if capability == "" {
		return scope{m: m}
	}
	return scope{m: m, prefix: capability + "/"}
}

type scope struct {
	m      *memory
	prefix string
}

var _ store.Store = scope{}

// key is k as stored; a key the Store would refuse is refused here too.
func (s scope) key(k string) (string, error) {
	if err := store.CheckKey(k); err != nil {
		return "", err
	}
	return s.prefix + k, nil
}

func (s scope) Get(k string) (string, bool, error) {
	key, err := s.key(k)
	if err != nil {
		return "", false, err
	}
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	v, ok := s.m.data[key]
	return v, ok, nil
}

func (s scope) Keys() ([]string, error) {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	var out []string
	for k := range s.m.data {
		name, ok := strings.CutPrefix(k, s.prefix)
		if ok && !strings.Contains(name, "/") {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out, nil
}

func (s scope) Set(_ context.Context, k, v string) error {
	key, err := s.key(k)
	if err != nil {
		return err
	}
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	s.m.data[key] = v
	return nil
}

func (s scope) Update(_ context.Context, k string, fn func(string, bool) (string, error)) error {
	key, err := s.key(k)
	if err != nil {
		return err
	}
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	old, found := s.m.data[key]
	v, err := fn(old, found)
	if err != nil {
		return err
	}
	s.m.data[key] = v
	return nil
}

func (s scope) Remove(_ context.Context, k string) error {
	key, err := s.key(k)
	if err != nil {
		return err
	}
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	delete(s.m.data, key)
	return nil
}

func (s scope) SetAndWait(ctx context.Context, k, v string) error { return s.Set(ctx, k, v) }
func (s scope) RemoveAndWait(ctx context.Context, k string) error { return s.Remove(ctx, k) }
func (s scope) Subscribe(func(store.Change)) (func(), error)      { return func() {}, nil }
func (s scope) WaitForSync(context.Context) error                 { return nil }
func (s scope) Module() store.Reader                              { return scope{m: s.m} }

func (s scope) SubscribeBatch(func([]store.Change)) (func(), error) { return func() {}, nil }

// Clear removes the scope's keys but vigil's own, as the Store does.
func (s scope) Clear(ctx context.Context) error {
	keys, _ := s.Keys()
	for _, k := range keys {
		if s.prefix == "" && strings.HasPrefix(k, store.ReservedPrefix) {
			continue
		}
		if err := s.Remove(ctx, k); err != nil {
			return err
		}
	}
	return nil
}
