package store

import (
	"context"
	"encoding/json"
	"fmt"
)

// Store is the key/value state of a module, as gate callbacks and handlers see
// it: either the module-wide scope or the scope of one capability.
type Store interface {
	Reader
	// Set sets a key's value. It returns once the API server has accepted the
	// write.
	Set(ctx context.Context, key, value string) error
	// Update sets a key to what fn returns for its current value. fn may run
	// more than once, against newer values, when other writers get in first;
	// an error from fn aborts this update and nothing is written.
	Update(ctx context.Context, key string, fn func(old string, found bool) (string, error)) error
	// Remove deletes a key; removing a missing key is no error.
	Remove(ctx context.Context, key string) error
	// SetAndWait is Set that also waits until this replica's local copy holds
	// the write.
	SetAndWait(ctx context.Context, key, value string) error
	// RemoveAndWait is Remove that also waits until the local copy no longer
	// holds the key.
	RemoveAndWait(ctx context.Context, key string) error
	// Subscribe calls fn with every change of this scope's keys, one at a time,
	// until unsubscribe is called. fn must not block for long: it holds up
	// the delivery of later changes.
	// It fails as Get does.
	Subscribe(fn func(Change)) (unsubscribe func(), err error)
	// SubscribeBatch is Subscribe with the changes of one write together,
	// in key order: a Clear, or the writes that shared a commit, arrive as
	// one call.
	SubscribeBatch(fn func([]Change)) (unsubscribe func(), err error)
	// Clear removes every key of this scope, and waits until the local copy
	// holds none. In the module-wide scope it leaves vigil's own keys
	// (ReservedPrefix), such as the schedules' state.
	Clear(ctx context.Context) error
	// WaitForSync waits until the local copy holds the state as of the first
	// list from the API server.
	WaitForSync(ctx context.Context) error
	// Module reads the module-wide scope, where gate callbacks keep what they
	// found, from a handler whose own Store is its capability's scope; a
	// module-wide Store reads itself.
	Module() Reader
}

// ReservedPrefix begins the keys vigil keeps in a module's module-wide scope
// for itself (vigil.schedule.<name>, a schedule's last tick): read them if
// you like, but leave them be; Clear does.
const ReservedPrefix = "vigil."

// Reader reads a Store.
type Reader interface {
	// Get returns a key's value from the local copy. It fails for an invalid
	// key, or when the Store cannot be reached (a Store connected on first
	// use, as gate callbacks and watcher handlers get, connects here).
	Get(key string) (value string, found bool, err error)
	// Keys returns the keys of this scope, sorted; it fails as Get does.
	Keys() ([]string, error)
}

// Change is a key's new state.
type Change struct {
	Key string
	// Value is the new value; empty when Removed.
	Value string
	// Removed reports that the key is gone, including when the whole Store
	// object was deleted.
	Removed bool
}

// GetJSON decodes a key's value as JSON into a T. It reads every view of a
// Store: a Store, and the Reader its Module returns.
func GetJSON[T any](s Reader, key string) (v T, found bool, err error) {
	raw, found, err := s.Get(key)
	if err != nil || !found {
		return v, false, err
	}
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		return v, true, fmt.Errorf("store: decode key %q as %T: %w", key, v, err)
	}
	return v, true, nil
}

// SetJSON encodes v as JSON and sets key to it.
func SetJSON[T any](ctx context.Context, s Store, key string, v T) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("store: encode %T for key %q: %w", v, key, err)
	}
	return s.Set(ctx, key, string(raw))
}

// SetJSONAndWait is SetJSON that waits as SetAndWait does.
func SetJSONAndWait[T any](ctx context.Context, s Store, key string, v T) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("store: encode %T for key %q: %w", v, key, err)
	}
	return s.SetAndWait(ctx, key, string(raw))
}
