package vigiltest

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer safe for concurrent use: give it to a process's
// stderr or a logger and read it from the test while they still write.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// set replaces what was written with b: a container's log, read again.
func (b *Buffer) set(p []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.b.Reset()
	b.b.Write(p)
}
