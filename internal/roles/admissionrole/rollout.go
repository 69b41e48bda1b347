package admissionrole

import (
	"context"
	"sync"
	"time"
)

// newerTTL is how long a newer version, once seen registered, is taken to
// stay registered without asking again: a rollout lasts far longer.
const newerTTL = 5 * time.Second

// newerCheck tells the admission handler whether a newer version of the
// module registered the webhook configurations (admit.Options.Newer). It is
// asked only about requests this version does not serve. The API server
// sends those only after it saw the configuration that routes them, so a
// "no" must come from a read that began after the request arrived: callers
// share one read in flight (never more than one at a time), and a caller that
// arrived while a read was in flight waits for the next. A "yes" is kept for
// newerTTL.
type newerCheck struct {
	// read returns the newer registered version, or ""; nil until
	// registration is on, and then nothing is newer.
	read func(ctx context.Context) (string, error)
	// timeout bounds one read.
	timeout time.Duration

	mu    sync.Mutex
	round *newerRound // in flight
	last  *newerRound // done
	newer string
	until time.Time
}

type newerRound struct {
	began   time.Time
	done    chan struct{}
	version string
	err     error
}

// Newer is admit.Options.Newer.
func (c *newerCheck) Newer(ctx context.Context) (string, error) {
	if c.read == nil {
		return "", nil
	}
	asked := time.Now()
	for {
		c.mu.Lock()
		if c.newer != "" && time.Now().Before(c.until) {
			v := c.newer
			c.mu.Unlock()
			return v, nil
		}
		if last := c.last; last != nil && !last.began.Before(asked) {
			c.mu.Unlock()
			return last.version, last.err // a read that began after this request arrived
		}
		rd := c.round
		if rd == nil {
			rd = &newerRound{began: time.Now(), done: make(chan struct{})}
			c.round = rd
			go c.run(rd)
		}
		c.mu.Unlock()
		select {
		case <-rd.done:
		case <-ctx.Done():
			return "", context.Cause(ctx)
		}
		if !rd.began.Before(asked) {
			return rd.version, rd.err
		}
		// That read began before this request arrived: take the next.
	}
}

func (c *newerCheck) run(rd *newerRound) {
	timeout := c.timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	rd.version, rd.err = c.read(ctx)
	cancel()
	c.mu.Lock()
	c.round, c.last = nil, rd
	if rd.err == nil && rd.version != "" {
		c.newer, c.until = rd.version, time.Now().Add(newerTTL)
	}
	c.mu.Unlock()
	close(rd.done)
}
