package server

import (
	"hash/maphash"
	"sync"
	"time"
)

// throttle remembers when something was last written, so that a fact that
// changes on every request (a token used, a device seen) is written at
// most once per period. An entry older than the period is as good as
// none, so a shard's map is cleared whenever it grows past its share of
// the entries it was made for.
//
// A move wakes 10,000 device streams at once, and each asked whether its
// device was due a "seen" write: 5 % of control's CPU in a fan-out's
// profile (docs/performance.md). The shards, each with its own lock, keep
// them from queueing on one; what took the time was the lookups in a large
// map, which a device-map request now makes only once the write it heard
// of last is stale (fresh; handleDeviceMap).
type throttle struct {
	every  time.Duration
	seed   maphash.Seed
	shards [throttleShards]throttleShard
}

const throttleShards = 32

type throttleShard struct {
	mu   sync.Mutex
	max  int
	last map[string]time.Time
	_    [64]byte // keeps neighbouring shards' locks off one cache line
}

func newThrottle(every time.Duration, entries int) *throttle {
	t := &throttle{every: every, seed: maphash.MakeSeed()}
	for i := range t.shards {
		t.shards[i].max = max(entries/throttleShards, 1)
		t.shards[i].last = map[string]time.Time{}
	}
	return t
}

// due reports whether key is due a write at now, and if so records it;
// last is the time recorded for key after the call (now, when due), which
// a caller may keep to ask again only once fresh says it is stale.
func (t *throttle) due(key string, now time.Time) (due bool, last time.Time) {
	sh := &t.shards[maphash.String(t.seed, key)%throttleShards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if last, ok := sh.last[key]; ok && t.fresh(last, now) {
		return false, last
	}
	if len(sh.last) >= sh.max {
		clear(sh.last)
	}
	sh.last[key] = now
	return true, now
}

// fresh reports whether a write at last still stands at now: within the
// period, and not after now (a clock that went back makes it stale: the
// time recorded would be wrong).
func (t *throttle) fresh(last, now time.Time) bool {
	return now.Sub(last) < t.every && !now.Before(last)
}
