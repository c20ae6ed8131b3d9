package stream

import (
	"context"
	"sync/atomic"
	"time"
)

// runner runs the visits of woken HTTP/1.1 streams (stream.run) on
// goroutines it keeps for a while, instead of a new goroutine per wake. A
// change to 10,000 devices woke 10,000 goroutines, each given a stack from
// the runtime's pool (the pool refilled after every collection, which
// frees the stacks of goroutines that ended): 9 % of control's CPU in the
// fan-out's profile.
//
// A visit may block in its write for up to WriteTimeout (a client that
// acknowledges but does not read), so the workers are many (max): only
// with that many such clients written at once do the queued visits wait
// for the first to time out. A full queue does not wait for the workers:
// the stream gets a goroutine of its own, as before. Idle workers end
// after idle.
type runner struct {
	q       chan visitor
	workers atomic.Int32
	max     int32
	idle    time.Duration
}

func newRunner(queue, workers int, idle time.Duration) *runner {
	return &runner{q: make(chan visitor, queue), max: int32(max(workers, 1)), idle: idle}
}

// visitor is what the runner runs: a stream's visits (stream.run), or a
// test's.
type visitor interface{ run() }

// add runs st.run on a worker, or on a goroutine of its own when the
// queue is full.
func (r *runner) add(st visitor) {
	select {
	case r.q <- st:
	default:
		go st.run()
		return
	}
	for {
		n := r.workers.Load()
		if n >= r.max {
			return // one of them takes it once it is done with what it runs
		}
		if r.workers.CompareAndSwap(n, n+1) {
			go r.work()
			return
		}
	}
}

// work takes streams off the queue until it has waited idle for one.
func (r *runner) work() {
	t := time.NewTimer(r.idle)
	defer t.Stop()
	for {
		select {
		case st := <-r.q:
			st.run()
			continue
		default:
		}
		t.Reset(r.idle)
		select {
		case st := <-r.q:
			st.run()
			continue
		case <-t.C:
		}
		// Leaving: a stream queued while every worker was busy (its add
		// started none) must still be taken, by this one if no other is.
		r.workers.Add(-1)
		if len(r.q) == 0 {
			return
		}
		if n := r.workers.Load(); n >= r.max || !r.workers.CompareAndSwap(n, n+1) {
			return // others are there (or were just started) for it
		}
	}
}

// sharedDeadline bounds the visits' reads (a Source's Load) as a context
// with a timeout per visit did, without a timer per visit: the fan-out's
// 10,000 timers, made and stopped, were 6 % of control's CPU. Visits that
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
