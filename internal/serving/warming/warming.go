package warming

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"time"

	"k8s.io/client-go/rest"
)

// marker is what the API server's 429 says while a watch cache is built.
var marker = []byte("storage is (re)initializing")

// maxBody bounds how much of a 429's body is read to find the marker.
const maxBody = 16 << 10

// Wrap makes cfg's clients retry reads turned away by a warming watch cache
// (see the package doc). It returns cfg, changed.
func Wrap(cfg *rest.Config) *rest.Config {
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &transport{next: rt, sleep: sleep} })
	return cfg
}

// Transport returns next, retrying reads turned away by a warming watch cache.
func Transport(next http.RoundTripper) http.RoundTripper {
	return &transport{next: next, sleep: sleep}
}

type transport struct {
	next  http.RoundTripper
	sleep func(*http.Request, time.Duration) bool
}

func sleep(r *http.Request, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-r.Context().Done():
		return false
	case <-t.C:
		return true
	}
}

func (t *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodGet || r.Body != nil && r.Body != http.NoBody {
		return t.next.RoundTrip(r)
	}
	var deadline time.Time
	wait := 5 * time.Millisecond
	for {
		resp, err := t.next.RoundTrip(r)
		if err != nil || resp.StatusCode != http.StatusTooManyRequests {
			return resp, err
		}
		after, perr := strconv.Atoi(resp.Header.Get("Retry-After"))
		if perr != nil || after <= 0 {
			return resp, nil
		}
		body, rerr := io.ReadAll(io.LimitReader(resp.Body, maxBody))
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		if rerr != nil || !bytes.Contains(body, marker) {
			return resp, nil
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(time.Duration(after) * time.Second)
		}
		left := time.Until(deadline)
		if left <= 0 {
			return resp, nil // client-go waits the Retry-After from here
		}
		if !t.sleep(r, min(wait, left)) {
			return resp, nil
		}
		wait = min(2*wait, 100*time.Millisecond)
	}
}
