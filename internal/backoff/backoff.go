// Package backoff is the one retry delay of RunOS VPN's clients of control
// (the daemon's sync and its pending sign-outs, the gateway's map and
// reports, the CLI's long-polls) and of control's own reconnects to its
// database (the timers' lease, the listener of other replicas' changes):
// exponential with jitter, 100 ms doubling to 10 s by default
// (docs/internals.md "Push"), each wait drawn from the upper half of the
// current step ("equal jitter") so that clients that failed together do
// not retry together. A success resets it.
//
// It is not a retry loop: callers decide what to retry and when to stop.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Defaults: the first step and the largest.
const (
	DefaultMin = 100 * time.Millisecond
	DefaultMax = 10 * time.Second
)

// Backoff is one sequence of delays. The zero value uses the defaults.
// It is not safe for concurrent use.
type Backoff struct {
	Min, Max time.Duration
	// Rand returns a number in [0, n); nil is math/rand/v2's. Tests fix it.
	Rand func(n int64) int64

	cur time.Duration
}

// New returns a Backoff from min to max.
func New(min, max time.Duration) *Backoff { return &Backoff{Min: min, Max: max} }

// Next returns the next delay: the step doubles from Min to Max, and the
// delay is drawn from [step/2, step].
func (b *Backoff) Next() time.Duration {
	lo, hi := b.Min, b.Max
	if lo <= 0 {
		lo = DefaultMin
	}
	if hi < lo {
		hi = max(DefaultMax, lo)
	}
	if b.cur == 0 {
		b.cur = lo
	} else {
		b.cur = min(2*b.cur, hi)
	}
	r := b.Rand
	if r == nil {
		r = rand.Int64N
	}
	half := b.cur / 2
	return half + time.Duration(r(int64(b.cur-half)+1))
}

// Reset starts the sequence again, after a success.
func (b *Backoff) Reset() { b.cur = 0 }

// Wait sleeps for Next, or until ctx ends (then it returns ctx's error).
func (b *Backoff) Wait(ctx context.Context) error {
	t := time.NewTimer(b.Next())
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
