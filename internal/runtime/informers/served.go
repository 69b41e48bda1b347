package informers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/vigilkit/vigil/internal/definition/scheme"
	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/runtime/events"
	"github.com/vigilkit/vigil/internal/runtime/podevents"
	"github.com/vigilkit/vigil/internal/runtime/waitfor"
)

// Served is a role's wait for the API server to serve the kinds its
// informers read, as its readiness tells it. controller-runtime's cache
// cannot even be made while a kind it selects is unknown to discovery
// ("failed to determine if … is namespaced"), so a role whose kinds a CRD
// serves waits for them first, the way a gate waits for a type: a watch of
// CRDs, then discovery caught up. A CRD installed late, or discovery lagging
// behind a CRD's Established, is a wait, never an exit.
type Served struct {
	mu      sync.Mutex
	started time.Time
	order   []schema.GroupVersionKind
	// waiting holds what was last seen of each kind not served yet.
	waiting map[schema.GroupVersionKind]string
}

// NewServed is the wait for kinds, each not looked up yet: readiness names
// them before the first look at the API server.
func NewServed(kinds []schema.GroupVersionKind) *Served {
	s := &Served{started: time.Now(), order: kinds, waiting: map[schema.GroupVersionKind]string{}}
	for _, k := range kinds {
		s.waiting[k] = "not looked up yet"
	}
	return s
}

// see records what was seen of a kind; served removes it.
func (s *Served) see(k schema.GroupVersionKind, seen string, served bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if served {
		delete(s.waiting, k)
		return
	}
	s.waiting[k] = seen
}

// Err is nil once every kind is served; until then it says which kinds are
// waited for, for how long, and what was last seen of each.
func (s *Served) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.waiting) == 0 {
		return nil
	}
	var parts []string
	for _, k := range s.order {
		if seen, ok := s.waiting[k]; ok {
			parts = append(parts, fmt.Sprintf("%s (%s)", kindName(k), seen))
		}
	}
	return fmt.Errorf("waiting %s for the API server to serve %s", time.Since(s.started).Round(time.Second), strings.Join(parts, "; "))
}

// kindName is a kind as messages name it: Exemption.v1alpha1.uds.dev.
func kindName(k schema.GroupVersionKind) string {
	return k.Kind + "." + k.Version + "." + k.Group
}

// CustomKinds are the kinds of agreed that are not built in: those a CRD
// serves, which the API server may not serve yet. Built-in kinds are served
// from the API server's start and are not looked up.
func CustomKinds(agreed []spec.Agreed) []schema.GroupVersionKind {
	var out []schema.GroupVersionKind
	for _, a := range agreed {
		if !scheme.BuiltIn(a.GVK) {
			out = append(out, a.GVK)
		}
	}
	return out
}

// stillWaitingEvery is how often a role still waiting for a kind says so.
const stillWaitingEvery = 10 * time.Second

// Await waits, concurrently for each kind, until the API server serves it,
// recording what it sees. It logs when a kind is not served, every
// stillWaitingEvery while it is not, and once it is, and records the same
// as Events on the role's pod (sink, when not nil). It fails only when ctx
// ends or a kind can never be served (ErrNotServable: a built-in group's
// kind the API server does not serve).
func (s *Served) Await(ctx context.Context, cfg *rest.Config, log logr.Logger, sink podevents.Sink) error {
	kinds := s.order
	if len(kinds) == 0 {
		return nil
	}
	w, err := waitfor.New(cfg, log)
	if err != nil {
		return err
	}
	errs := make([]error, len(kinds))
	var wg sync.WaitGroup
	for i, k := range kinds {
		wg.Go(func() { errs[i] = awaitKind(ctx, w, k, s, log, sink) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return nil
}

// awaitKind waits for one kind, saying so while it does.
func awaitKind(ctx context.Context, w *waitfor.Waiter, k schema.GroupVersionKind, s *Served, log logr.Logger, sink podevents.Sink) error {
	start := time.Now()
	name := kindName(k)
	var mu sync.Mutex
	waited, last := false, ""
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		t := time.NewTicker(stillWaitingEvery)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				mu.Lock()
				seen := last
				mu.Unlock()
				events.Info(log, events.KindWaiting, "still waiting for the API server to serve the kind: the role starts once it does",
					"kind", name, "for", time.Since(start).Round(time.Second).String(), "lastSeen", seen)
			}
		}
	}()
	err := w.AwaitKind(ctx, k, func(p waitfor.Progress) {
		mu.Lock()
		first := !waited
		waited, last = true, p.Seen
		mu.Unlock()
		s.see(k, p.Seen, false)
		events.Info(log, events.KindWaiting, "waiting for the API server to serve the kind (is its CRD installed?): the role starts once it does",
			"kind", name, "lastSeen", p.Seen)
		if first && sink != nil {
			sink.Event(false, "WaitingForKind", fmt.Sprintf("waiting for the API server to serve %s: %s", name, p.Seen))
		}
	})
	if err != nil {
		if ctx.Err() == nil {
			s.see(k, err.Error(), false)
		}
		return fmt.Errorf("waiting for the API server to serve %s: %w", name, err)
	}
	s.see(k, "", true)
	mu.Lock()
	defer mu.Unlock()
	if waited {
		took := time.Since(start).Round(time.Millisecond)
		events.Info(log, events.KindServed, "the API server serves the kind", "kind", name, "took", took.String())
		if sink != nil {
			sink.Event(false, "KindServed", fmt.Sprintf("the API server serves %s, after %s", name, took))
		}
	}
	return nil
}
