package audit

// EachItem is eachItem, for the tests of paging.
var EachItem = eachItem

// EachStreamed is eachStreamed, for the tests of streaming.
var EachStreamed = eachStreamed

// StreamError is streamError, for the tests of streaming.
type StreamError = streamError

// Seen is how many objects the stream gave before it broke.
func (e *streamError) Seen() int64 { return e.seen }
