package stream

import (
	"sync"
	"time"

	"github.com/runos/vpn/control/clock"
)

// wheel is the one timer of every stream: it ticks once a second and
// visits one slot of streams per tick, so each stream is looked at once a
// heartbeat period (a heartbeat written if it wrote nothing for that
// long), and 10,000 streams' heartbeats are spread over the period rather
// than written at once. Streams that ask to be rechecked are signalled on
// every tick.
type wheel struct {
	mu        sync.Mutex
	clk       clock.Clock
	heartbeat time.Duration
	slots     [][]*stream
	cur       int
	recheck   map[*stream]struct{}
	timer     clock.Timer
	stopped   bool
}

func (wh *wheel) start(clk clock.Clock, heartbeat time.Duration) {
	wh.clk, wh.heartbeat = clk, heartbeat
	n := max(1, int(heartbeat/tick))
	wh.slots = make([][]*stream, n)
	wh.recheck = map[*stream]struct{}{}
	wh.mu.Lock()
	wh.timer = clk.AfterFunc(tick, wh.tick)
	wh.mu.Unlock()
}

func (wh *wheel) stop() {
	wh.mu.Lock()
	defer wh.mu.Unlock()
	wh.stopped = true
	if wh.timer != nil {
		wh.timer.Stop()
	}
}

// add puts st in the slot visited last: its first heartbeat check comes a
// period after it opened.
func (wh *wheel) add(st *stream) {
	wh.mu.Lock()
	defer wh.mu.Unlock()
	st.slot = (wh.cur + len(wh.slots) - 1) % len(wh.slots)
	st.pos = len(wh.slots[st.slot])
	wh.slots[st.slot] = append(wh.slots[st.slot], st)
	if st.recheck {
		wh.recheck[st] = struct{}{}
	}
}

func (wh *wheel) remove(st *stream) {
	wh.mu.Lock()
	defer wh.mu.Unlock()
	s := wh.slots[st.slot]
	if st.pos >= len(s) || s[st.pos] != st {
		return // not on the wheel (never added)
	}
	last := s[len(s)-1]
	s[st.pos], last.pos = last, st.pos
	s[len(s)-1] = nil
	wh.slots[st.slot] = s[:len(s)-1]
	delete(wh.recheck, st)
}

func (wh *wheel) tick() {
	wh.mu.Lock()
	defer wh.mu.Unlock()
	if wh.stopped {
		return
	}
	now := wh.clk.Now().UnixNano()
	// Quiet for a period less half a tick: the visits are a period apart,
	// and a stream that wrote just after its last visit is due at this one.
	due := int64(wh.heartbeat - tick/2)
	for _, st := range wh.slots[wh.cur] {
		if now-st.lastWrite.Load() >= due {
			st.signal(flagBeat)
		}
	}
	for st := range wh.recheck {
		st.signal(flagRecheck)
	}
	wh.cur = (wh.cur + 1) % len(wh.slots)
	wh.timer = wh.clk.AfterFunc(tick, wh.tick)
}
