package stream

import (
	"sync"
	"time"

	"github.com/runos/vpn/control/clock"
)

// wheel is the one timer of every stream: it ticks once a second and
// visits one slot of streams per tick, so each stream is looked at once a
// heartbeat period (is its client still there? a heartbeat if it wrote
// nothing for that long), and 10,000 streams' heartbeats are spread over
// the period rather than written at once. Streams that ask to be rechecked are signalled on
// every tick. With no stream open it does not tick.
type wheel struct {
	mu        sync.Mutex
	clk       clock.Clock
	heartbeat time.Duration
	slots     [][]*stream
	cur       int
	recheck   map[*stream]struct{}
	n         int         // streams on the wheel
	timer     clock.Timer // nil while not ticking
	stopped   bool
}

func (wh *wheel) start(clk clock.Clock, heartbeat time.Duration) {
	wh.clk, wh.heartbeat = clk, heartbeat
	n := max(1, int(heartbeat/tick))
	wh.slots = make([][]*stream, n)
	wh.recheck = map[*stream]struct{}{}
}

func (wh *wheel) stop() {
	wh.mu.Lock()
	defer wh.mu.Unlock()
	wh.stopped = true
	if wh.timer != nil {
		wh.timer.Stop()
		wh.timer = nil
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
	wh.n++
	if wh.timer == nil && !wh.stopped {
		wh.timer = wh.clk.AfterFunc(tick, wh.tick)
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
	wh.n--
}

func (wh *wheel) tick() {
	wh.mu.Lock()
	defer wh.mu.Unlock()
	if wh.stopped || wh.timer == nil {
		return
	}
	for _, st := range wh.slots[wh.cur] {
		st.signal(flagBeat)
	}
	for st := range wh.recheck {
		st.signal(flagRecheck)
	}
	wh.cur = (wh.cur + 1) % len(wh.slots)
	wh.timer = nil
	if wh.n > 0 {
		wh.timer = wh.clk.AfterFunc(tick, wh.tick)
	}
}
