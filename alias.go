package vigil

import "github.com/vigilkit/vigil/store"

// Store is a module's shared, cluster-wide key/value state, as gate callbacks
// and handlers receive it. See package store.
type Store = store.Store

// StoreChange is one key's new state, as Store subscribers receive it.
type StoreChange = store.Change
