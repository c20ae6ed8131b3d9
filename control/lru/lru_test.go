package lru

import (
	"fmt"
	"sync"
	"testing"
)

func TestForgetsLeastRecentlyUsed(t *testing.T) {
	c := New[string, int](2)
	c.Put("a", 1)
	c.Put("b", 2)
	if v, ok := c.Get("a"); !ok || v != 1 { // a is now the most recent
		t.Fatalf("a = %d, %v", v, ok)
	}
	c.Put("c", 3) // full: b goes
	if _, ok := c.Get("b"); ok {
		t.Fatal("b kept although least recently used")
	}
	for k, want := range map[string]int{"a": 1, "c": 3} {
		if v, ok := c.Get(k); !ok || v != want {
			t.Fatalf("%s = %d, %v; want %d", k, v, ok, want)
		}
	}
	if c.Len() != 2 {
		t.Fatalf("len %d", c.Len())
	}
}

func TestUpdate(t *testing.T) {
	c := New[string, int](10)
	add := func(v int, ok bool) (int, bool) { return v + 1, true }
	c.Update("k", add)
	if got := c.Update("k", add); got != 2 {
		t.Fatalf("after two adds: %d", got)
	}
	c.Update("k", func(int, bool) (int, bool) { return 0, false })
	if _, ok := c.Get("k"); ok || c.Len() != 0 {
		t.Fatal("update with keep=false did not delete")
	}
	c.Put("x", 1)
	c.Delete("x")
	if c.Len() != 0 {
		t.Fatal("delete kept the entry")
	}
}

// TestShardedHoldsSize: a cache large enough to be sharded still holds at
// most its size, and keeps what was used last.
func TestShardedHoldsSize(t *testing.T) {
	const size = 1000
	c := New[int, int](size)
	if len(c.shards) < 2 {
		t.Fatalf("a cache of %d has %d shard(s)", size, len(c.shards))
	}
	for i := range 10 * size {
		c.Put(i, i)
		if n := c.Len(); n > size {
			t.Fatalf("after %d puts: %d entries, more than %d", i+1, n, size)
		}
	}
	if v, ok := c.Get(10*size - 1); !ok || v != 10*size-1 {
		t.Fatalf("the last put was forgotten: %d, %v", v, ok)
	}
}

// TestConcurrentUpdates: counters updated from many goroutines at once
// (run with -race) lose no update, whichever shards they fall in.
func TestConcurrentUpdates(t *testing.T) {
	const workers, keys, rounds = 8, 300, 200
	c := New[int, int](100_000)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				k := (w*rounds + r) % keys
				c.Update(k, func(v int, _ bool) (int, bool) { return v + 1, true })
				c.Get((k + 1) % keys)
				if r%50 == 0 {
					c.Len()
				}
			}
		}()
	}
	wg.Wait()
	total := 0
	for k := range keys {
		v, _ := c.Get(k)
		total += v
	}
	if total != workers*rounds {
		t.Fatalf("counted %d updates, want %d", total, workers*rounds)
	}
}

// BenchmarkGetParallel reads a cache from every CPU at once, as woken
// streams do: one shard (a small cache) against many.
func BenchmarkGetParallel(b *testing.B) {
	for _, size := range []int{100, 200_000} {
		c := New[int, int](size)
		for i := range size {
			c.Put(i, i)
		}
		b.Run(fmt.Sprintf("shards-%d", len(c.shards)), func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					c.Get(i % 100)
					i++
				}
			})
		})
	}
}

func TestPurge(t *testing.T) {
	c := New[int, int](1000)
	for i := range 500 {
		c.Put(i, i)
	}
	c.Purge()
	if n := c.Len(); n != 0 {
		t.Fatalf("after Purge: %d entries", n)
	}
	c.Put(1, 2)
	if v, ok := c.Get(1); !ok || v != 2 {
		t.Fatalf("after Purge a Put is not kept: %v %v", v, ok)
	}
}
