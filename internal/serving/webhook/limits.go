package webhook

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync/atomic"
	"time"
)

// Limits bound what clients can make the server hold, so that no client —
// the API server under load, or anyone who can reach the port — can take
// it past its memory limit. What exceeds them is answered at once, with no
// Retry-After (client-go would otherwise retry), so that the API server
// applies the webhook's failure policy instead of waiting for its timeout.
// Zero fields take the defaults.
type Limits struct {
	// MaxInFlight is how many admission requests are decided at once, their
	// bodies read; one more is answered 429. 200 when zero, as
	// kube-apiserver's --max-mutating-requests-inflight: more than the API
	// servers of most clusters send a webhook at once, and small reviews
	// decided at once (each within BodyAllowance) stay within tens of MiB.
	// A request whose binding outlasts the handler's deadline is answered
	// then, but holds its slot until the binding returns: bindings that
	// hang stay bounded in number.
	MaxInFlight int
	// MaxReading is how many request bodies are read at once; one more is
	// answered 429. 512 when zero.
	MaxReading int
	// BodyAllowance is how much of each body is read without drawing on
	// BodyBudget: ordinary reviews are a few KiB, and large ones cannot
	// crowd them out. 64 KiB when zero.
	BodyAllowance int64
	// MaxBodyBytes bounds one request body; a larger one is answered 413.
	// The handler's own limit; 19 MiB when zero.
	MaxBodyBytes int64
	// BodyBudget bounds the bytes of request bodies held at once, across
	// requests, beyond their allowances; a request whose body does not fit
	// is answered 429. Decoding a review takes a few times its body again,
	// so this bounds most of the memory requests can take. It must hold one
	// body of MaxBodyBytes. 24 MiB, or MaxBodyBytes when larger, when zero.
	BodyBudget int64
	// BodyTimeout bounds reading one request body; a client that is slower
	// is answered 408 and its connection closed. 10s when zero.
	BodyTimeout time.Duration
	// BodyMinRate is the least rate, in bytes a second, at which a body
	// must arrive after a second's grace: a body of n bytes is read within
	// a second and n/BodyMinRate, BodyTimeout at most, or answered 408 and
	// its connection closed, so that a client trickling bodies holds each
	// connection a second or so, not BodyTimeout. 256 KiB when zero: an
	// ordinary review arrives within its first second, the largest (19 MiB)
	// within BodyTimeout, as the API server sends a body at once.
	BodyMinRate int64
	// HeaderTimeout bounds the TLS handshake and reading a request's
	// headers. 5s when zero.
	HeaderTimeout time.Duration
	// MaxHeaderBytes bounds a request's headers. 32 KiB when zero.
	MaxHeaderBytes int
	// MaxConns bounds open connections. One more, from a source address
	// holding fewer than its fair share (MaxConns over the number of
	// sources with connections), evicts a connection of the source holding
	// the most — its oldest idle one, or else its oldest still reading a
	// request — so that the API server, which holds few, always gets one
	// however many sources flood the port. From a source at its share or
	// above, one more evicts only an idle connection (accepted with no
	// request yet, or kept alive between requests) and is closed at accept
	// when none is. A connection whose request's handler runs is never
	// evicted. 512 when zero.
	MaxConns int
	// MaxConnsPerSource bounds the connections of one client address even
	// while the listener has room: one more is closed at accept. Half of
	// MaxConns when zero: more than the API server needs to send
	// MaxInFlight reviews at once, one per connection.
	MaxConnsPerSource int
	// FirstRequestTimeout bounds the time from a connection's accept to its
	// first request's headers, TLS handshake included: silent connections
	// are closed. 3s when zero.
	FirstRequestTimeout time.Duration
	// IdleTimeout bounds how long a connection is kept alive between
	// requests. 90s when zero, as the API server's webhook client keeps
	// idle connections.
	IdleTimeout time.Duration
	// Refused, when set, is told each request refused by these limits, with
	// the reason: "in_flight", "reading", "body_budget", "too_large",
	// "body_timeout", "bad_body"; and each connection closed by them:
	// "connections" and "per_source" at accept, "evicted_idle" for an idle
	// one closed to make room, "evicted_reading" for one still reading a
	// request closed to make room for a source below its share, "silent"
	// past FirstRequestTimeout.
	Refused func(reason string)
	// Accepted, when set, is told each connection kept at accept: each is
	// a TLS handshake. A count near the requests' means the client opens a
	// connection for most requests rather than keeping them alive.
	Accepted func()
}

// metricsLimits fills in the defaults of the metrics listener: the same
// connection limits as the webhook's, smaller, so that scrapers — or anyone
// who reaches the port — cannot take the memory the webhook needs. A
// scraper opens a connection or two at a time; one kept idle past 10s is
// closed.
func metricsLimits(l Limits) Limits {
	if l.MaxConns <= 0 {
		l.MaxConns = 16
	}
	if l.MaxConnsPerSource <= 0 {
		l.MaxConnsPerSource = 4
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = 10 * time.Second
	}
	return l.withDefaults()
}

func (l Limits) withDefaults() Limits {
	if l.MaxBodyBytes <= 0 {
		l.MaxBodyBytes = 19 << 20
	}
	if l.MaxInFlight <= 0 {
		l.MaxInFlight = 200
	}
	if l.MaxReading <= 0 {
		l.MaxReading = 512
	}
	if l.BodyAllowance <= 0 {
		l.BodyAllowance = 64 << 10
	}
	if l.BodyBudget <= 0 {
		l.BodyBudget = max(24<<20, l.MaxBodyBytes)
	}
	if l.BodyTimeout <= 0 {
		l.BodyTimeout = 10 * time.Second
	}
	if l.BodyMinRate <= 0 {
		l.BodyMinRate = 256 << 10
	}
	if l.HeaderTimeout <= 0 {
		l.HeaderTimeout = 5 * time.Second
	}
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = 32 << 10
	}
	if l.MaxConns <= 0 {
		l.MaxConns = 512
	}
	if l.MaxConnsPerSource <= 0 {
		l.MaxConnsPerSource = max(1, l.MaxConns/2)
	}
	if l.FirstRequestTimeout <= 0 {
		l.FirstRequestTimeout = 3 * time.Second
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = 90 * time.Second
	}
	if l.Refused == nil {
		l.Refused = func(string) {}
	}
	if l.Accepted == nil {
		l.Accepted = func() {}
	}
	return l
}

// limited serves next within the limits. It reads the whole body first —
// within the body timeout, its first BodyAllowance bytes free and the rest
// from the body budget, taken as the bytes arrive — then takes a slot in
// flight and hands next the body as one whose Bytes method returns it, with
// no second copy. A slow client holds only what it has sent, and no slot.
type limited struct {
	next    http.Handler
	limits  Limits
	reading chan struct{}
	slots   chan struct{}
	budget  atomic.Int64 // bytes of bodies held beyond their allowances
	// active counts the requests being served, from their arrival.
	active atomic.Int64
}

func newLimited(next http.Handler, l Limits) *limited {
	return &limited{next: next, limits: l, reading: make(chan struct{}, l.MaxReading), slots: make(chan struct{}, l.MaxInFlight)}
}

// refuse answers a request refused by the limits. No Retry-After: client-go
// retries a 429 that carries one, and the API server should give up at once.
func (h *limited) refuse(w http.ResponseWriter, status int, reason, msg string) {
	h.limits.Refused(reason)
	if status != http.StatusTooManyRequests {
		// A client too slow, or sending too much or garbage: its connection
		// is not worth keeping.
		w.Header().Set("Connection", "close")
	}
	http.Error(w, msg, status)
}

func (h *limited) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.active.Add(1)
	defer h.active.Add(-1)
	if r.ContentLength > h.limits.MaxBodyBytes {
		h.refuse(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("expected an AdmissionReview of at most %d bytes, got %d", h.limits.MaxBodyBytes, r.ContentLength))
		return
	}
	select {
	case h.reading <- struct{}{}:
	default:
		h.refuse(w, http.StatusTooManyRequests, "reading", fmt.Sprintf("too many admission request bodies being read (limit %d): the API server applies the webhook's failure policy", h.limits.MaxReading))
		return
	}
	rc := http.NewResponseController(w)
	body, held, status, reason, err := h.read(r, rc)
	<-h.reading
	defer h.budget.Add(-held)
	if !markServing(r) {
		// Its connection was evicted for another source's, while the body
		// was read: counted then, and closed.
		return
	}
	if err != nil {
		h.refuse(w, status, reason, err.Error())
		return
	}
	_ = rc.SetReadDeadline(time.Time{})
	select {
	case h.slots <- struct{}{}:
		defer func() { <-h.slots }()
	default:
		h.refuse(w, http.StatusTooManyRequests, "in_flight", fmt.Sprintf("too many admission requests in flight (limit %d): the API server applies the webhook's failure policy", h.limits.MaxInFlight))
		return
	}
	r.Body = &bodyBytes{Reader: bytes.NewReader(body), b: body}
	r.ContentLength = int64(len(body))
	h.next.ServeHTTP(w, r)
}

// bodyGrace is the time a body is given beyond what BodyMinRate asks.
const bodyGrace = time.Second

// read reads the body within the limits, setting rc's read deadline before
// each chunk by BodyMinRate and BodyTimeout. held is the budget taken, to
// give back once the request is answered, also on error.
func (h *limited) read(r *http.Request, rc *http.ResponseController) (body []byte, held int64, status int, reason string, err error) {
	began := time.Now()
	var total int64
	fail := func(e error) ([]byte, int64, int, string, error) {
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(e, &tooLarge):
			return nil, held, http.StatusRequestEntityTooLarge, "too_large", fmt.Errorf("expected an AdmissionReview of at most %d bytes, got more", h.limits.MaxBodyBytes)
		case errors.Is(e, os.ErrDeadlineExceeded):
			return nil, held, http.StatusRequestTimeout, "body_timeout", fmt.Errorf("expected the request body at %d bytes a second or more, within %s; got %d bytes in %s: send it at once",
				h.limits.BodyMinRate, h.limits.BodyTimeout, total, time.Since(began).Round(time.Millisecond))
		}
		return nil, held, http.StatusBadRequest, "bad_body", fmt.Errorf("read request body: %w", e)
	}
	limit := h.limits.MaxBodyBytes + 1 // one more byte tells a body over the limit
	if r.ContentLength >= 0 {
		limit = r.ContentLength + 1 // and one more tells a body longer than announced
	}
	src := io.LimitReader(r.Body, limit)
	// Read in chunks, 16 KiB doubling up to 1 MiB, joined once at the end:
	// no buffer regrown and copied as the body arrives. What lies beyond
	// the allowance comes from the budget before it is read.
	var chunks [][]byte
	size := int64(16 << 10)
	for total < limit {
		n := min(size, limit-total)
		if charge := max(0, total+n-h.limits.BodyAllowance) - held; charge > 0 {
			if h.budget.Add(charge) > h.limits.BodyBudget {
				h.budget.Add(-charge)
				return nil, held, http.StatusTooManyRequests, "body_budget", fmt.Errorf("too many admission request bytes in flight (limit %d): the API server applies the webhook's failure policy", h.limits.BodyBudget)
			}
			held += charge
		}
		// By the end of this chunk: a second, and the time its bytes take
		// at the least rate.
		due := bodyGrace + time.Duration(float64(total+n)/float64(h.limits.BodyMinRate)*float64(time.Second))
		_ = rc.SetReadDeadline(began.Add(min(due, h.limits.BodyTimeout)))
		chunk := make([]byte, n)
		m, err := io.ReadFull(src, chunk)
		total += int64(m)
		chunks = append(chunks, chunk[:m])
		if total > h.limits.MaxBodyBytes {
			return fail(&http.MaxBytesError{Limit: h.limits.MaxBodyBytes})
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return fail(err)
		}
		size = min(size*2, 1<<20)
	}
	if r.ContentLength >= 0 && total != r.ContentLength {
		return fail(io.ErrUnexpectedEOF)
	}
	if len(chunks) == 1 {
		return chunks[0], held, 0, "", nil
	}
	body = make([]byte, 0, total)
	for _, c := range chunks {
		body = append(body, c...)
	}
	return body, held, 0, "", nil
}

// bodyBytes is a request body already read.
type bodyBytes struct {
	*bytes.Reader
	b []byte
}

func (b *bodyBytes) Bytes() []byte { return b.b }
func (b *bodyBytes) Close() error  { return nil }
