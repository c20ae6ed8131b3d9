// Package lru is control's one in-memory cache: a map of at most Max
// entries that, when full, forgets an entry used least recently. Control
// keeps in memory only what it can read again from the store (a session's
// principal, a device's part of its map, a cluster's config), so forgetting
// costs a read, never a wrong answer.
//
// A large cache is split into shards by a hash of the key, each with its
// own lock and its own order of use: 19,000 streams woken by one change
// all read the caches at once, and one lock for all of them was where
// they queued (issue 25). What is forgotten first is then the least
// recently used of the key's shard, which for a cache much larger than
// its shard count is as good.
//
// It is not a store of record: nothing that replicas must agree on lives
// here (DESIGN.md "Scale").
package lru

import (
	"container/list"
	"hash/maphash"
	"sync"
)

// Sharding: a cache of at least minPerShard*maxShards entries gets
// maxShards shards; a smaller one fewer, and one of under 2*minPerShard
// keeps one exact order of use.
const (
	maxShards   = 64
	minPerShard = 64
)

// Cache is safe for concurrent use. The zero value is not usable; use New.
type Cache[K comparable, V any] struct {
	seed   maphash.Seed
	shards []shard[K, V]
}

type shard[K comparable, V any] struct {
	mu    sync.Mutex
	max   int
	m     map[K]*list.Element
	order list.List // front: most recently used
	_     [64]byte  // keeps neighbouring shards' locks off one cache line
}

type entry[K comparable, V any] struct {
	k K
	v V
}

// New returns a cache of at most size entries (at least 1).
func New[K comparable, V any](size int) *Cache[K, V] {
	size = max(size, 1)
	n := min(max(size/minPerShard, 1), maxShards)
	c := &Cache[K, V]{seed: maphash.MakeSeed(), shards: make([]shard[K, V], n)}
	for i := range c.shards {
		s := &c.shards[i]
		// The first size%n shards take one more, so the shards hold size.
		s.max = size / n
		if i < size%n {
			s.max++
		}
		s.m = make(map[K]*list.Element)
		s.order.Init()
	}
	return c
}

func (c *Cache[K, V]) shard(k K) *shard[K, V] {
	if len(c.shards) == 1 {
		return &c.shards[0]
	}
	return &c.shards[maphash.Comparable(c.seed, k)%uint64(len(c.shards))]
}

// Get returns the value of k and marks it used.
func (c *Cache[K, V]) Get(k K) (V, bool) {
	s := c.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[k]
	if !ok {
		var zero V
		return zero, false
	}
	s.order.MoveToFront(e)
	return e.Value.(*entry[K, V]).v, true
}

// Put sets the value of k, forgetting the least recently used entry of its
// shard if that is full.
func (c *Cache[K, V]) Put(k K, v V) {
	s := c.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.putLocked(k, v)
}

func (s *shard[K, V]) putLocked(k K, v V) {
	if e, ok := s.m[k]; ok {
		e.Value.(*entry[K, V]).v = v
		s.order.MoveToFront(e)
		return
	}
	if len(s.m) >= s.max {
		old := s.order.Back()
		s.order.Remove(old)
		delete(s.m, old.Value.(*entry[K, V]).k)
	}
	s.m[k] = s.order.PushFront(&entry[K, V]{k, v})
}

// Update replaces the value of k by what fn returns, given the current one
// (and whether there was one), in one step that no other call on k
// interleaves with; keep=false deletes k. fn must not use the cache.
func (c *Cache[K, V]) Update(k K, fn func(v V, ok bool) (nv V, keep bool)) V {
	s := c.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	var cur V
	e, ok := s.m[k]
	if ok {
		cur = e.Value.(*entry[K, V]).v
	}
	nv, keep := fn(cur, ok)
	switch {
	case keep:
		s.putLocked(k, nv)
	case ok:
		s.order.Remove(e)
		delete(s.m, k)
	}
	return nv
}

// Delete forgets k.
func (c *Cache[K, V]) Delete(k K) {
	s := c.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.m[k]; ok {
		s.order.Remove(e)
		delete(s.m, k)
	}
}

// Purge forgets every entry, shard by shard (calls running meanwhile see
// some shards emptied and others not yet, as with any concurrent Delete).
func (c *Cache[K, V]) Purge() {
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		clear(s.m)
		s.order.Init()
		s.mu.Unlock()
	}
}

// Len is the number of entries (the sum of the shards', each read in turn).
func (c *Cache[K, V]) Len() int {
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
}
