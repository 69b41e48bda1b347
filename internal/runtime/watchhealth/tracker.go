package watchhealth

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/connrotation"
)

// DefaultStaleAfter is how long an informer may hear nothing from the API
// server before it is stale: well under the server's own watch timeout (5 to
// 10 minutes) and client-go's HTTP/2 health check (45 s).
const DefaultStaleAfter = 30 * time.Second

// EnvStaleAfter overrides DefaultStaleAfter for a role's process, as a Go
// duration ("10s"); at least 4s, so that a watch renewed every half of it
// lasts a couple of seconds.
const EnvStaleAfter = "VIGIL_WATCH_STALE_AFTER"

// Options tune a Tracker.
type Options struct {
	// StaleAfter is the stale bound; DefaultStaleAfter (or EnvStaleAfter)
	// when zero.
	StaleAfter time.Duration
	// RestartAfter is how long an informer must have been stale, its own
	// requests unanswered while others are, before Live fails: 4 times
	// StaleAfter when zero.
	RestartAfter time.Duration
	Log          logr.Logger
}

// StaleAfterFromEnv is EnvStaleAfter's value, or DefaultStaleAfter when it
// is unset; an unparsable or too small value is an error that says so.
func StaleAfterFromEnv() (time.Duration, error) {
	v := os.Getenv(EnvStaleAfter)
	if v == "" {
		return DefaultStaleAfter, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 4*time.Second {
		return 0, fmt.Errorf("%s=%q: expected a duration of at least 4s, such as 30s; unset it for the default %s", EnvStaleAfter, v, DefaultStaleAfter)
	}
	return d, nil
}

// Tracker follows the informers of one role. Instrument its client config
// before the role makes any client, then Wrap each informer's list-watch.
type Tracker struct {
	module, role string
	staleAfter   time.Duration
	restartAfter time.Duration
	log          logr.Logger

	dialer *connrotation.Dialer
	// answered is when the role last had a 2xx answer from the API server,
	// in Unix nanoseconds.
	answered atomic.Int64

	mu        sync.Mutex
	informers []*Informer
}

// New makes the Tracker of one role of a module; its stale bound is
// o.StaleAfter, else EnvStaleAfter's, else DefaultStaleAfter. Close it when
// the role ends.
func New(module, role string, o Options) (*Tracker, error) {
	t := &Tracker{module: module, role: role, staleAfter: o.StaleAfter, restartAfter: o.RestartAfter, log: o.Log}
	if t.staleAfter <= 0 {
		d, err := StaleAfterFromEnv()
		if err != nil {
			return nil, err
		}
		t.staleAfter = d
	}
	if t.restartAfter <= 0 {
		t.restartAfter = 4 * t.staleAfter
	}
	if t.log.GetSink() == nil {
		t.log = logr.Discard()
	}
	collector.add(t)
	return t, nil
}

// Renew is how long the tracker asks the API server to keep each watch
// open: half the stale bound, at least a second.
func (t *Tracker) Renew() time.Duration {
	return max(time.Second, (t.staleAfter / 2).Truncate(time.Second))
}

// renewSeconds is Renew as a watch's timeoutSeconds.
func (t *Tracker) renewSeconds() *int64 {
	secs := int64(t.Renew() / time.Second)
	return &secs
}

// Close stops exporting the tracker's metrics: its role has ended.
func (t *Tracker) Close() {
	collector.remove(t)
}

// Instrument returns a copy of cfg whose connections the tracker can close
// and whose answers it sees: the 429s, by informer, and when the role last
// had an answer. A cfg with its own Transport keeps its connections.
func (t *Tracker) Instrument(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	if cfg.Transport == nil {
		dial := cfg.Dial
		if dial == nil {
			dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
		}
		t.dialer = connrotation.NewDialer(dial)
		cfg.Dial = t.dialer.DialContext
	}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &answers{next: rt, t: t} })
	return cfg
}

// resetConnections closes every connection of the role to the API server,
// so that the next request dials afresh instead of waiting on a dead one.
func (t *Tracker) resetConnections() {
	if t.dialer == nil {
		return
	}
	t.dialer.CloseAll()
}

// Informer registers an informer of kind (in namespace, when it watches
// one; else empty) and returns its record: nil for a nil Tracker, whose
// informers are not followed.
func (t *Tracker) Informer(kind, namespace string) *Informer {
	if t == nil {
		return nil
	}
	inf := &Informer{t: t, Kind: kind}
	inf.namespace.Store(namespace)
	inf.heard.Store(time.Now().UnixNano())
	t.mu.Lock()
	t.informers = append(t.informers, inf)
	t.mu.Unlock()
	return inf
}

// Remove forgets an informer that has stopped, such as a gate's once its
// wait is over.
func (t *Tracker) Remove(inf *Informer) {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.informers = slices.DeleteFunc(t.informers, func(o *Informer) bool { return o == inf })
	t.mu.Unlock()
}

// Informers returns the tracker's informers.
func (t *Tracker) Informers() []*Informer {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.informers)
}

// Check is the role's readiness: an error naming every stale informer, how
// long it has heard nothing and since when.
func (t *Tracker) Check() error {
	if t == nil {
		return nil
	}
	now := time.Now()
	var stale []string
	for _, inf := range t.Informers() {
		if s := inf.Staleness(now); s > t.staleAfter {
			stale = append(stale, inf.describe(now, s))
		}
	}
	if len(stale) == 0 {
		return nil
	}
	return fmt.Errorf("stale informers (nothing heard from the API server for more than %s): %s", t.staleAfter, strings.Join(stale, "; "))
}

// Live is the role's liveness: it fails only when a restart would help, when
// an informer has been stale for RestartAfter and its own requests get no
// answer while the role's other requests do. An API server that answers no
// one is not a reason to restart: the role keeps its cache and waits.
func (t *Tracker) Live() error {
	if t == nil {
		return nil
	}
	now := time.Now()
	answered := time.Unix(0, t.answered.Load())
	if now.Sub(answered) > t.staleAfter {
		return nil
	}
	for _, inf := range t.Informers() {
		s := inf.Staleness(now)
		if s < t.restartAfter {
			continue
		}
		if own := time.Unix(0, inf.answered.Load()); now.Sub(own) <= t.staleAfter {
			continue // its requests are answered: it is being refused, not stuck
		}
		return fmt.Errorf("informer %s has heard nothing for %s while the API server answers the role's other requests: restart the process", inf.Name(), s.Round(time.Second))
	}
	return nil
}

// Informer is one informer's record.
type Informer struct {
	t    *Tracker
	Kind string
	// namespace is the namespace the informer watches, learnt from its
	// requests' paths when not given.
	namespace atomic.Value

	// heard and answered are Unix nanoseconds: when the informer last heard
	// from the API server (a list, a watch established, a watch event), and
	// when one of its requests last had any answer.
	heard, answered atomic.Int64
	// read is when a byte of one of its responses last arrived, in Unix
	// nanoseconds: a long list still arriving is not given up.
	read atomic.Int64
	// lists counts list requests (watch-lists included) that began a list;
	// the first is the informer's start, the others relists.
	lists, throttled, reconnects, stalls atomic.Int64
}

// Name is the informer's kind, and namespace when it watches one.
func (i *Informer) Name() string {
	if ns := i.Namespace(); ns != "" {
		return i.Kind + " in " + ns
	}
	return i.Kind
}

// Namespace is the namespace the informer watches; empty for all.
func (i *Informer) Namespace() string { s, _ := i.namespace.Load().(string); return s }

// Staleness is how long the informer has heard nothing, at now.
func (i *Informer) Staleness(now time.Time) time.Duration {
	return max(0, now.Sub(time.Unix(0, i.heard.Load())))
}

// Counts are an informer's counters.
type Counts struct {
	Relists, Throttled, Reconnects, Stalls int64
}

// Counts returns the informer's counters.
func (i *Informer) Counts() Counts {
	return Counts{Relists: max(0, i.lists.Load()-1), Throttled: i.throttled.Load(), Reconnects: i.reconnects.Load(), Stalls: i.stalls.Load()}
}

func (i *Informer) hear() { i.heard.Store(time.Now().UnixNano()) }

func (i *Informer) describe(now time.Time, s time.Duration) string {
	since := time.Unix(0, i.heard.Load()).UTC().Format(time.RFC3339)
	c := i.Counts()
	return fmt.Sprintf("%s for %s (since %s; %d stalls, %d relists, %d answered 429)", i.Name(), s.Round(time.Second), since, c.Stalls, c.Relists, c.Throttled)
}

// stalled records a silence past the stale bound and closes the role's
// connections.
func (i *Informer) stalled(what string) {
	i.stalls.Add(1)
	i.t.log.Info("informer stale: nothing heard from the API server; closing the role's connections and asking again",
		"informer", i.Name(), "waited", what, "for", i.Staleness(time.Now()).Round(time.Millisecond).String())
	i.t.resetConnections()
}

// informerKey carries the informer of a request in its context.
type informerKey struct{}

func withInformer(ctx context.Context, i *Informer) context.Context {
	return context.WithValue(ctx, informerKey{}, i)
}

// answers sees the role's answers from the API server.
type answers struct {
	next http.RoundTripper
	t    *Tracker
}

func (a *answers) RoundTrip(r *http.Request) (*http.Response, error) {
	inf, _ := r.Context().Value(informerKey{}).(*Informer)
	if inf != nil && inf.Namespace() == "" {
		if ns := namespaceOf(r.URL.Path); ns != "" {
			inf.namespace.Store(ns)
		}
	}
	resp, err := a.next.RoundTrip(r)
	if err != nil {
		return resp, err
	}
	now := time.Now().UnixNano()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		a.t.answered.Store(now)
	}
	if inf != nil {
		inf.answered.Store(now)
		if resp.StatusCode == http.StatusTooManyRequests {
			inf.throttled.Add(1)
		}
		resp.Body = &reading{ReadCloser: resp.Body, inf: inf}
	}
	return resp, nil
}

// reading is a response body that records when its bytes arrive.
type reading struct {
	io.ReadCloser
	inf *Informer
}

func (r *reading) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	if n > 0 {
		r.inf.read.Store(time.Now().UnixNano())
	}
	return n, err
}

// namespaceOf is the namespace of an API path: /api/v1/namespaces/NS/... or
// /apis/G/V/namespaces/NS/...; empty for a cluster-wide one.
func namespaceOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for j := 2; j+2 < len(parts); j++ {
		if parts[j] == "namespaces" {
			return parts[j+1]
		}
	}
	return ""
}
