package fresh

import "sync"

// Reads records what one binding's run on one admission request read
// through listers. The zero value is ready to use; it is safe for concurrent
// use, as a binding may read from several goroutines.
type Reads struct {
	mu    sync.Mutex
	reads []Read
	read  bool
	found bool
}

// Read is one lister type's barrier and a scope of it that a binding read.
type Read struct {
	Barrier *Barrier
	Scope   Scope
}

// maxScopes is how many scopes of one type a record keeps apart: a binding
// that read more is caught up on the whole type, in one round trip rather
// than one for each.
const maxScopes = 8

// Note records one lister read: b is the lister's barrier (nil when its
// role has none), s what the read looked at, and found whether it returned
// any object.
func (r *Reads) Note(b *Barrier, s Scope, found bool) {
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
	same := 0
	for _, have := range r.reads {
		if have.Barrier != b {
			continue
		}
		if have.Scope == s || have.Scope.Whole() {
			return
		}
		same++
	}
	if same < maxScopes && !s.Whole() {
		r.reads = append(r.reads, Read{Barrier: b, Scope: s})
		return
	}
	// The whole type covers every scope of it.
	kept := r.reads[:0]
	for _, have := range r.reads {
		if have.Barrier != b {
			kept = append(kept, have)
		}
	}
	r.reads = append(kept, Read{Barrier: b})
}

// Reset empties the record, for the next binding's run; a nil record stays
// nil.
func (r *Reads) Reset() {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reads, r.read, r.found = r.reads[:0], false, false
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

// All is what the binding read through barriers: each barrier with each
// scope once.
func (r *Reads) All() []Read {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Read(nil), r.reads...)
}
