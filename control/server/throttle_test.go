package server

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestThrottle(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	th := newThrottle(time.Minute, 64)
	for _, c := range []struct {
		key  string
		at   time.Duration
		want bool
	}{
		{"a", 0, true},                 // first: due
		{"a", 30 * time.Second, false}, // within the period
		{"b", 30 * time.Second, true},  // another key
		{"a", time.Minute, true},       // the period over
		{"a", time.Minute + time.Second, false},
		{"a", 10 * time.Second, true}, // the clock went back: due, and recorded
		{"a", 20 * time.Second, false},
	} {
		got, last := th.due(c.key, t0.Add(c.at))
		if got != c.want {
			t.Errorf("due(%s, +%s) = %v, want %v", c.key, c.at, got, c.want)
		}
		// last is what stands for the key now: fresh at this instant.
		if !th.fresh(last, t0.Add(c.at)) || got && !last.Equal(t0.Add(c.at)) {
			t.Errorf("due(%s, +%s): last %s, not the write that stands", c.key, c.at, last.Sub(t0))
		}
	}

	// Past its size a shard forgets: at worst a write more, never none.
	if th.fresh(t0, t0.Add(time.Minute)) || th.fresh(t0, t0.Add(-time.Second)) || !th.fresh(t0, t0.Add(59*time.Second)) {
		t.Error("fresh: a write stands for the period after it, not before it")
	}

	small := newThrottle(time.Hour, throttleShards) // one entry per shard
	for i := range 200 {
		small.due(fmt.Sprint("k", i), t0)
	}
	n := 0
	for i := range small.shards {
		n += len(small.shards[i].last)
	}
	if n > throttleShards {
		t.Errorf("%d entries kept, want at most %d", n, throttleShards)
	}
}

// TestThrottleConcurrent: each key is due exactly once per period however
// many ask at once (run with -race).
func TestThrottleConcurrent(t *testing.T) {
	th := newThrottle(time.Hour, 10_000)
	now := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	dues := map[string]int{}
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				k := fmt.Sprint("dev-", (i+g*7)%500)
				if due, _ := th.due(k, now); due {
					mu.Lock()
					dues[k]++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if len(dues) != 500 {
		t.Fatalf("%d keys were due, want 500", len(dues))
	}
	for k, n := range dues {
		if n != 1 {
			t.Fatalf("%s due %d times in one period", k, n)
		}
	}
}
