package admit

// workers run the bindings of one request each, so that a request can be
// answered when its bindings outlast the deadline. A goroutine started per
// request begins with a small stack that each request grows again (copying
// it, a few per cent of a request's CPU); these are kept, their stacks
// grown, for the next request. A worker whose binding hangs past the
// deadline stays busy until it returns, and is replaced as needed.
type workers struct {
	idle chan chan func()
}

// maxIdleWorkers bounds the workers kept waiting: about the requests in
// flight at once under a heavy load.
const maxIdleWorkers = 128

func newWorkers() *workers { return &workers{idle: make(chan chan func(), maxIdleWorkers)} }

// run runs fn on an idle worker, or a new one.
func (w *workers) run(fn func()) {
	select {
	case next := <-w.idle:
		next <- fn
	default:
		go w.work(fn)
	}
}

func (w *workers) work(fn func()) {
	next := make(chan func())
	for {
		fn()
		select {
		case w.idle <- next:
		default:
			return // enough are idle
		}
		fn = <-next
	}
}
