package progress

import (
	"context"
	"sync"
	"time"
)

// Line is what a Reporter says of one pending item at a tick.
type Line struct {
	// What is waited for, as the item was added.
	What string
	// Seen is what the item last saw; empty when nothing was seen yet.
	Seen string
	// Waited is how long the Reporter has been running.
	Waited time.Duration
	// Callback is how long the item's callback has been running, once what
	// it waited for was seen; zero while it still waits.
	Callback time.Duration
}

// Reporter tracks pending items and emits a Line per pending item every
// interval. It is safe for concurrent use.
type Reporter struct {
	began time.Time
	emit  func(Line)

	mu    sync.Mutex
	items []*Item
}

// New returns a Reporter that passes its lines to emit; the time waited is
// counted from now.
func New(emit func(Line)) *Reporter {
	return &Reporter{began: time.Now(), emit: emit}
}

// Add adds a pending item that waits for what and has seen seen so far.
func (r *Reporter) Add(what, seen string) *Item {
	it := &Item{what: what, seen: seen}
	r.mu.Lock()
	r.items = append(r.items, it)
	r.mu.Unlock()
	return it
}

// Start emits lines every interval until the returned stop is called. stop
// may be called more than once and returns once emitting has ended. An
// interval of 0 or less emits nothing.
func (r *Reporter) Start(interval time.Duration) (stop func()) {
	if interval <= 0 {
		return func() {}
	}
	quit, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				r.Tick()
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(quit) })
		<-ended
	}
}

// Tick emits one line per pending item, in the order they were added.
func (r *Reporter) Tick() {
	r.mu.Lock()
	items := append([]*Item(nil), r.items...)
	r.mu.Unlock()
	waited := time.Since(r.began)
	for _, it := range items {
		it.mu.Lock()
		what, seen, done, calling := it.what, it.seen, it.done, it.calling
		it.mu.Unlock()
		if done {
			continue
		}
		l := Line{What: what, Seen: seen, Waited: waited}
		if !calling.IsZero() {
			l.Callback = max(time.Since(calling), time.Nanosecond)
		}
		r.emit(l)
	}
}

// Item is one thing waited for.
type Item struct {
	mu      sync.Mutex
	what    string
	seen    string
	done    bool
	calling time.Time // when the running callback began; zero when none runs
}

// Calling marks the item's callback as running, until done is called: what
// it waited for was seen, and the lines say so rather than "waiting".
func (i *Item) Calling() (done func()) {
	i.mu.Lock()
	i.calling = time.Now()
	i.mu.Unlock()
	return func() {
		i.mu.Lock()
		i.calling = time.Time{}
		i.mu.Unlock()
	}
}

// CallingSince is when the running callback began; zero when none runs.
func (i *Item) CallingSince() time.Time {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.calling
}

type itemKey struct{}

// WithItem gives ctx the item of the wait it runs, for CallbackRunning.
func WithItem(ctx context.Context, it *Item) context.Context {
	return context.WithValue(ctx, itemKey{}, it)
}

// ItemFrom is the item WithItem gave ctx; nil when none.
func ItemFrom(ctx context.Context) *Item {
	it, _ := ctx.Value(itemKey{}).(*Item)
	return it
}

// CallbackRunning marks the callback of ctx's item as running, until done is
// called: for what runs a callback inside the wait (a Sample gate). Nothing
// is marked when ctx has no item.
func CallbackRunning(ctx context.Context) (done func()) {
	if it := ItemFrom(ctx); it != nil {
		return it.Calling()
	}
	return func() {}
}

// See records what the item saw last and reports whether it differs from
// what it saw before.
func (i *Item) See(seen string) (changed bool) {
	i.mu.Lock()
	defer i.mu.Unlock()
	changed = seen != i.seen
	i.seen = seen
	return changed
}

// Seen is what the item saw last.
func (i *Item) Seen() string {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.seen
}

// Done takes the item out of the lines; Seen still tells what it saw last.
func (i *Item) Done() {
	i.mu.Lock()
	i.done = true
	i.mu.Unlock()
}
