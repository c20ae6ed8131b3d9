// Package lru is control's one in-memory cache: a map of at most Max
// entries that, when full, forgets the entry used least recently. Control
// keeps in memory only what it can read again from the store (a session's
// principal, a device's part of its map, a cluster's config), so forgetting
// costs a read, never a wrong answer.
//
// It is not a store of record: nothing that replicas must agree on lives
// here (DESIGN.md "Scale").
package lru

import (
	"container/list"
	"sync"
)

// Cache is safe for concurrent use. The zero value is not usable; use New.
type Cache[K comparable, V any] struct {
	mu    sync.Mutex
	max   int
	m     map[K]*list.Element
	order list.List // front: most recently used
}

type entry[K comparable, V any] struct {
	k K
	v V
}

// New returns a cache of at most size entries (at least 1).
func New[K comparable, V any](size int) *Cache[K, V] {
	c := &Cache[K, V]{max: max(size, 1), m: make(map[K]*list.Element)}
	c.order.Init()
	return c
}

// Get returns the value of k and marks it used.
func (c *Cache[K, V]) Get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok {
		var zero V
		return zero, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*entry[K, V]).v, true
}

// Put sets the value of k, forgetting the least recently used entry if the
// cache is full.
func (c *Cache[K, V]) Put(k K, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.putLocked(k, v)
}

func (c *Cache[K, V]) putLocked(k K, v V) {
	if e, ok := c.m[k]; ok {
		e.Value.(*entry[K, V]).v = v
		c.order.MoveToFront(e)
		return
	}
	if len(c.m) >= c.max {
		old := c.order.Back()
		c.order.Remove(old)
		delete(c.m, old.Value.(*entry[K, V]).k)
	}
	c.m[k] = c.order.PushFront(&entry[K, V]{k, v})
}

// Update replaces the value of k by what fn returns, given the current one
// (and whether there was one), in one step that no other call interleaves
// with; keep=false deletes k.
func (c *Cache[K, V]) Update(k K, fn func(v V, ok bool) (nv V, keep bool)) V {
	c.mu.Lock()
	defer c.mu.Unlock()
	var cur V
	e, ok := c.m[k]
	if ok {
		cur = e.Value.(*entry[K, V]).v
	}
	nv, keep := fn(cur, ok)
	switch {
	case keep:
		c.putLocked(k, nv)
	case ok:
		c.order.Remove(e)
		delete(c.m, k)
	}
	return nv
}

// Delete forgets k.
func (c *Cache[K, V]) Delete(k K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[k]; ok {
		c.order.Remove(e)
		delete(c.m, k)
	}
}

// Len is the number of entries.
func (c *Cache[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
