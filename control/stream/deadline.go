package stream

import (
	"context"
	"sync/atomic"
	"time"
)

// sharedDeadline bounds the visits' reads (a Source's Load) as a context
// with a timeout per visit did, without a timer per visit: the fan-out's
// 10,000 timers, made and stopped, were 8 % of control's CPU. Visits that
// start within every of each other share one context that ends timeout
// after it was made, so a read has between timeout−every and timeout.
type sharedDeadline struct {
	timeout, every time.Duration
	cur            atomic.Pointer[deadlineContext]
}

type deadlineContext struct {
	ctx  context.Context
	made time.Time
	// cancel is never called: the context ends at its deadline, and
	// visits that took it may still be reading when the next one is made.
	cancel context.CancelFunc
}

func (d *sharedDeadline) context() context.Context {
	now := time.Now()
	if c := d.cur.Load(); c != nil && now.Sub(c.made) < d.every {
		return c.ctx
	}
	ctx, cancel := context.WithDeadline(context.Background(), now.Add(d.timeout))
	d.cur.Store(&deadlineContext{ctx: ctx, made: now, cancel: cancel})
	return ctx
}
