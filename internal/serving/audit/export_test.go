package audit

import (
	"sync"

	"k8s.io/apimachinery/pkg/watch"
)

// EachItem is eachItem, for the tests of paging.
var EachItem = eachItem

// EachStreamed is eachStreamed, for the tests of streaming.
var EachStreamed = eachStreamed

// StreamError is streamError, for the tests of streaming.
type StreamError = streamError

// Seen is how many objects the stream gave before it broke.
func (e *streamError) Seen() int64 { return e.seen }

// NoStreamHook passes a's streams on as the API server sends them.
func (a *Auditor) NoStreamHook() { a.stream = nil }

// CutStreamsAfter ends each of a's streams after n objects, as a stream
// the API server or the network ends before its last object.
func (a *Auditor) CutStreamsAfter(n int) {
	a.stream = func(w watch.Interface) watch.Interface { return newCutWatch(w, n, false) }
}

// StallStreamsAfter holds each of a's streams silent after n objects, as an
// API server that stops sending, or a proxy that holds a watch's bytes
// back, would, until the audit stops it.
func (a *Auditor) StallStreamsAfter(n int) {
	a.stream = func(w watch.Interface) watch.Interface { return newCutWatch(w, n, true) }
}

// cutWatch passes on w's events until n objects have passed, then stops w
// and ends its own, or, when stall is set, stops w and sends nothing more
// until it is stopped itself.
type cutWatch struct {
	ch   chan watch.Event
	done chan struct{}
	once sync.Once
}

func newCutWatch(w watch.Interface, n int, stall bool) *cutWatch {
	c := &cutWatch{ch: make(chan watch.Event), done: make(chan struct{})}
	go func() {
		defer close(c.ch)
		defer w.Stop()
		for ev := range w.ResultChan() {
			if ev.Type == watch.Added {
				if n == 0 {
					if stall {
						w.Stop()
						<-c.done
					}
					return
				}
				n--
			}
			select {
			case c.ch <- ev:
			case <-c.done:
				return
			}
		}
	}()
	return c
}

func (c *cutWatch) ResultChan() <-chan watch.Event { return c.ch }
func (c *cutWatch) Stop()                          { c.once.Do(func() { close(c.done) }) }
