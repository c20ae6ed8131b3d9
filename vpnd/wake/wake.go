// Package wake notices that the laptop slept, or that the daemon was held
// still (SIGSTOP, a debugger, a starved scheduler): after either, WireGuard
// sessions may have lapsed on the other side while this side's timers,
// which count monotonic time, believe them fresh, so the daemon must
// re-handshake at once rather than carry nothing until a timer fires.
//
// It needs no OS notification: every tick it compares two clocks. The
// wall clock runs through a suspend while the monotonic one (Go's, on
// Linux and macOS) stands still, so a suspend shows as the wall clock
// jumping ahead of the monotonic one; a held process shows as a tick that
// came far later than it was due, on both clocks. It is not for network
// changes (platform/netmon).
package wake

import (
	"context"
	"time"
)

// Sleep is a stretch during which the daemon did not run, in wall-clock time.
type Sleep struct {
	From, To time.Time
}

// Duration is how long the sleep lasted.
func (s Sleep) Duration() time.Duration { return s.To.Sub(s.From) }

// Reading is both clocks at one instant: the wall clock and the monotonic
// time since some fixed start.
type Reading struct {
	Wall time.Time
	Mono time.Duration
}

// Detector decides, reading by reading, whether the daemon slept between
// two of them. It does no I/O and reads no clock.
type Detector struct {
	Every     time.Duration // how often readings are due
	Threshold time.Duration // more lost than this is a sleep
	prev      Reading
	started   bool
}

// Observe takes the next reading and reports the sleep it ends, if any.
func (d *Detector) Observe(r Reading) (Sleep, bool) {
	prev, first := d.prev, !d.started
	d.prev, d.started = r, true
	if first {
		return Sleep{}, false
	}
	mono := r.Mono - prev.Mono
	wall := r.Wall.Sub(prev.Wall)
	held := mono > d.Every+d.Threshold   // the tick came late on every clock
	suspended := wall-mono > d.Threshold // the wall clock ran while the monotonic one stood
	if !held && !suspended {
		return Sleep{}, false
	}
	return Sleep{From: prev.Wall, To: r.Wall}, true
}

// Defaults of Watch.
const (
	Every     = time.Second
	Threshold = 3 * time.Second
)

// Watch reads the clocks every second until ctx ends and calls onWake
// (in Watch's goroutine) after each sleep.
func Watch(ctx context.Context, onWake func(Sleep)) {
	d := Detector{Every: Every, Threshold: Threshold}
	base := time.Now()
	read := func() Reading {
		now := time.Now()
		return Reading{Wall: now.Round(0), Mono: now.Sub(base)}
	}
	d.Observe(read())
	t := time.NewTicker(Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if s, ok := d.Observe(read()); ok {
			onWake(s)
		}
	}
}
