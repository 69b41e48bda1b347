package fresh

import "sync"

// Reads records what one binding's run on one admission request read
// through listers. The zero value is ready to use; it is safe for concurrent
// use, as a binding may read from several goroutines.
type Reads struct {
	mu       sync.Mutex
	barriers []*Barrier
	read     bool
	found    bool
}

// Note records one lister read: b is the lister's barrier (nil when its
// role has none) and found whether the read returned any object.
func (r *Reads) Note(b *Barrier, found bool) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.read = true
	r.found = r.found || found
	if b == nil {
		return
	}
	for _, have := range r.barriers {
		if have == b {
			return
		}
	}
	r.barriers = append(r.barriers, b)
}

// Reset empties the record, for the next binding's run; a nil record stays
// nil.
func (r *Reads) Reset() {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.barriers, r.read, r.found = r.barriers[:0], false, false
}

// Read reports whether the binding read any lister.
func (r *Reads) Read() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.read
}

// Found reports whether a lister read returned an object.
func (r *Reads) Found() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.found
}

// Barriers are the barriers of the listers read, each once.
func (r *Reads) Barriers() []*Barrier {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*Barrier(nil), r.barriers...)
}
