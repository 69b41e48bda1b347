package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/store/v1alpha1"
)

// mutation computes a key's next state from its current one: the value, and
// whether the key exists afterwards.
type mutation func(old string, found bool) (value string, keep bool, err error)

// op is one queued write of one key.
type op struct {
	ctx    context.Context
	key    string // as stored, with the scope's prefix
	name   string // as the caller named it
	mutate mutation
	// clear, when set, makes the op remove every stored key it reports
	// (Clear): key and mutate are unused.
	clear func(key string) bool

	done chan struct{}
	rv   string
	err  error
}

func (o *op) finish(rv string, err error) {
	o.rv, o.err = rv, err
	close(o.done)
}

// maxBatch bounds how many queued writes one commit takes.
const maxBatch = 512

// writer commits queued writes until ctx ends: each commit takes every write
// queued so far, so writers that arrive while a commit is in flight share the
// next one.
func (s *Client) writer(ctx context.Context) {
	for {
		var batch []*op
		select {
		case <-ctx.Done():
			s.drain(ctx)
			return
		case o := <-s.ops:
			batch = append(batch, o)
		}
	more:
		for len(batch) < maxBatch {
			select {
			case o := <-s.ops:
				batch = append(batch, o)
			default:
				break more
			}
		}
		s.commit(ctx, batch)
	}
}

// drain fails the writes still queued when the store stops.
func (s *Client) drain(ctx context.Context) {
	for {
		select {
		case o := <-s.ops:
			o.finish("", fmt.Errorf("store: write %q: store stopped: %w", o.name, context.Cause(ctx)))
		default:
			return
		}
	}
}

// base returns the newest version this replica knows of, watched or written,
// or nil when the newest thing it knows is that there is none.
func (s *Client) base() *v1alpha1.Store {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.written != nil && newer(s.written.ResourceVersion, s.seenRV) {
		return s.written.DeepCopy()
	}
	if s.cur == nil {
		return nil
	}
	return s.cur.DeepCopy()
}

// commit applies a batch of writes to the newest version in one
// compare-and-swap write, re-applying them to the server's version after a
// conflict, until it lands, the batch's callers give up or an error that no
// retry can fix.
func (s *Client) commit(ctx context.Context, batch []*op) {
	backoff := wait.Backoff{Duration: 2 * time.Millisecond, Factor: 2, Jitter: 1, Steps: 1 << 30, Cap: time.Second}
	base := s.base()
	for {
		batch = live(batch)
		if len(batch) == 0 {
			return
		}
		next, results := apply(base, batch, s.ns, s.obj)
		if next == nil {
			// Nothing changes: the writes already hold in base.
			rv := ""
			if base != nil {
				rv = base.ResourceVersion
			}
			finishAll(batch, results, rv)
			return
		}
		callCtx, cancel := context.WithTimeout(ctx, callTimeout)
		var err error
		if base == nil {
			err = s.c.Create(callCtx, next)
		} else {
			err = s.c.Update(callCtx, next)
		}
		cancel()
		switch {
		case err == nil:
			s.stats.writes.Add(1)
			s.stats.batches.Add(1)
			s.mu.Lock()
			s.written = next.DeepCopy()
			s.mu.Unlock()
			finishAll(batch, results, next.ResourceVersion)
			return
		case apierrors.IsConflict(err), apierrors.IsAlreadyExists(err), base != nil && apierrors.IsNotFound(err):
			// Someone else wrote (or deleted) first: start again from the
			// server's version.
			s.stats.conflicts.Add(1)
			if base, err = s.fetch(ctx); err != nil {
				s.log.V(1).Info("store fetch failed; retrying", "err", err.Error())
				base = s.base()
			}
			sleep(ctx, backoff.Step()/4)
		case apierrors.IsForbidden(err):
			verb := "update"
			if base == nil {
				verb = "create"
			}
			failAll(batch, s.forbidden(verb, err))
			return
		case base == nil && apierrors.IsNotFound(err):
			failAll(batch, fmt.Errorf("store: create %s/%s: namespace %q does not exist: create it, or run the module in an existing namespace: %w", s.ns, s.obj, s.ns, err))
			return
		case (apierrors.IsInvalid(err) || apierrors.IsRequestEntityTooLargeError(err) || apierrors.IsBadRequest(err)) && len(batch) > 1:
			// One write the checks here did not catch must not take the
			// others down with it: commit them one by one.
			for _, o := range batch {
				s.commit(ctx, []*op{o})
			}
			return
		case apierrors.IsInvalid(err) || apierrors.IsRequestEntityTooLargeError(err) || apierrors.IsBadRequest(err):
			failAll(batch, fmt.Errorf("store: write %q: the API server refused it: %w", batch[0].name, err))
			return
		default:
			// The API server is unreachable or overloaded: keep trying while
			// the writers wait.
			s.log.V(1).Info("store write failed; retrying", "err", err.Error())
			sleep(ctx, backoff.Step())
			if ctx.Err() != nil {
				failAll(batch, fmt.Errorf("store: store stopped: %w", context.Cause(ctx)))
				return
			}
			base = s.base()
		}
	}
}

// fetch reads the object from the API server, past the local copy.
func (s *Client) fetch(ctx context.Context) (*v1alpha1.Store, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	obj := &v1alpha1.Store{}
	err := s.c.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: s.obj}, obj)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return obj, nil
}

// apply runs the batch's mutations in order over base's data. It returns the
// object to write, or nil when nothing changes, and each write's outcome; a
// write that fails is left out and fails alone.
func apply(base *v1alpha1.Store, batch []*op, ns, name string) (*v1alpha1.Store, []error) {
	var next *v1alpha1.Store
	if base != nil {
		next = base.DeepCopy()
	} else {
		next = &v1alpha1.Store{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	if next.Data == nil {
		next.Data = map[string]string{}
	}
	size := dataSize(next.Data)
	results := make([]error, len(batch))
	changed := false
	for i, o := range batch {
		if o.clear != nil {
			for k, v := range next.Data {
				if o.clear(k) {
					size -= entrySize(k, v, true)
					delete(next.Data, k)
					changed = true
				}
			}
			continue
		}
		old, found := next.Data[o.key]
		v, keep, err := o.mutate(old, found)
		if err != nil {
			results[i] = err
			continue
		}
		if keep == found && v == old {
			continue
		}
		grown := size - entrySize(o.key, old, found) + entrySize(o.key, v, keep)
		if grown > MaxBytes {
			results[i] = fmt.Errorf("%w: setting key %q to %d bytes would make store %s/%s %d bytes, over the limit of %d (900 KiB): keep large data elsewhere (a ConfigMap or a volume) and store a reference",
				ErrTooLarge, o.name, len(v), ns, name, grown, MaxBytes)
			continue
		}
		size = grown
		if keep {
			next.Data[o.key] = v
		} else {
			delete(next.Data, o.key)
		}
		changed = true
	}
	if !changed {
		return nil, results
	}
	next.Status = v1alpha1.StoreStatus{Keys: len(next.Data), Bytes: rawSize(next.Data)}
	return next, results
}

// entrySize is what a key adds to the data's JSON encoding: "key":"value",
func entrySize(key, value string, present bool) int {
	if !present {
		return 0
	}
	return jsonLen(key) + jsonLen(value) + 2
}

func dataSize(data map[string]string) int {
	n := 2
	for k, v := range data {
		n += entrySize(k, v, true)
	}
	return n
}

func rawSize(data map[string]string) int {
	n := 0
	for k, v := range data {
		n += len(k) + len(v)
	}
	return n
}

func jsonLen(s string) int {
	b, _ := json.Marshal(s)
	return len(b)
}

// live drops the writes whose callers have given up, telling them so.
func live(batch []*op) []*op {
	out := batch[:0]
	for _, o := range batch {
		if err := o.ctx.Err(); err != nil {
			o.finish("", fmt.Errorf("store: write %q: %w", o.name, context.Cause(o.ctx)))
			continue
		}
		out = append(out, o)
	}
	return out
}

func finishAll(batch []*op, results []error, rv string) {
	for i, o := range batch {
		if results[i] != nil {
			o.finish("", results[i])
		} else {
			o.finish(rv, nil)
		}
	}
}

func failAll(batch []*op, err error) {
	for _, o := range batch {
		o.finish("", err)
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// forbidden explains an RBAC refusal: the verb, the resource, the namespace,
// and the rule that would allow it.
func (s *Client) forbidden(verb string, err error) error {
	return fmt.Errorf("%w: %s stores.vigil.dev %q in namespace %q was refused: grant the module's ServiceAccount a Role rule {apiGroups: [vigil.dev], resources: [stores], verbs: [get, list, watch, create, update]} in %q: %v",
		ErrForbidden, verb, s.obj, s.ns, s.ns, err)
}
