package testkit

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"

	"k8s.io/client-go/rest"
)

// Reads records the list and watch requests a client makes through a
// config: for the tests of what a first read asks the API server for.
type Reads struct {
	mu  sync.Mutex
	all []url.Values
}

// RecordReads returns a copy of cfg whose GET requests of a path ending in
// suffix (a namespace's collection: "/namespaces/ns/configmaps") are
// recorded, by their query, in the Reads returned.
func RecordReads(cfg *rest.Config, suffix string) (*rest.Config, *Reads) {
	r := &Reads{}
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, suffix) {
				r.mu.Lock()
				r.all = append(r.all, req.URL.Query())
				r.mu.Unlock()
			}
			return rt.RoundTrip(req)
		})
	})
	return cfg, r
}

// RecordCreates returns a copy of cfg whose POST requests are recorded, by
// path, and a function that returns the paths recorded so far, in order:
// for the tests of the order in which a client creates objects.
func RecordCreates(cfg *rest.Config) (*rest.Config, func() []string) {
	var (
		mu    sync.Mutex
		paths []string
	)
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodPost {
				mu.Lock()
				paths = append(paths, req.URL.Path)
				mu.Unlock()
			}
			return rt.RoundTrip(req)
		})
	})
	return cfg, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(paths)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Reset forgets the reads recorded so far.
func (r *Reads) Reset() {
	r.mu.Lock()
	r.all = nil
	r.mu.Unlock()
}

// NotConsistent says why the reads recorded since the last Reset are not a
// consistent first read, or "" when they are: every list asks for the
// latest resourceVersion (none), never "0", which the API server may answer
// from a watch cache a write behind; and where nothing was listed, the first
// read is a stream (sendInitialEvents) from the latest resourceVersion.
func (r *Reads) NotConsistent() string {
	r.mu.Lock()
	all := slices.Clone(r.all)
	r.mu.Unlock()
	if len(all) == 0 {
		return "no read was made"
	}
	lists := 0
	for _, q := range all {
		if q.Get("watch") == "true" {
			continue
		}
		lists++
		if rv := q.Get("resourceVersion"); rv != "" {
			return fmt.Sprintf("a list %v asks for resourceVersion %q; want the latest (none), so that the read sees what was written before it", q, rv)
		}
	}
	if q := all[0]; lists == 0 && (q.Get("sendInitialEvents") != "true" || q.Get("resourceVersion") != "") {
		return fmt.Sprintf("the first read %v neither lists nor streams from the latest resourceVersion", q)
	}
	return ""
}
