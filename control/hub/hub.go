// Package hub is control's change hub (docs/internals.md "Push"). Every
// committed change carries the global version it was given and the topics it
// concerns (device:<id>, gateway:<cid>/<nid>, cluster:<cid>, service:<id>,
// move:<id>, session:<id>). The hub keeps, per topic, the version of its
// latest change and wakes only the waiters of the topics a change concerns,
// so a move wakes the devices of one cluster and nobody else.
//
// The hub holds no documents: a long-poll registers a Watch, reads its
// document (and the document's version) from the store, and sleeps on the
// Watch only if that version is not newer than what the caller has seen.
// Registering before reading is what makes it race-free: a commit after the
// read is published after the registration, so it wakes the watch.
//
// With several control replicas, each replica's hub is fed the same changes
// (PostgreSQL LISTEN/NOTIFY); nothing here assumes one process.
package hub

import (
	"sync"
	"sync/atomic"
)

// Topic names.
func Device(id string) string        { return "device:" + id }
func Session(id string) string       { return "session:" + id }
func Cluster(cid string) string      { return "cluster:" + cid }
func Service(id string) string       { return "service:" + id }
func Move(id string) string          { return "move:" + id }
func Gateway(cid, nid string) string { return "gateway:" + cid + "/" + nid }

// Hub fans changes out to watchers. The zero value is not usable; use New.
type Hub struct {
	mu       sync.RWMutex // read-locked by the many version checks
	global   uint64
	versions map[string]uint64
	watchers map[string]map[*Watch]struct{}
}

// New returns a hub that starts from the versions the store holds.
func New(global uint64, versions map[string]uint64) *Hub {
	v := make(map[string]uint64, len(versions))
	for k, x := range versions {
		v[k] = x
	}
	return &Hub{global: global, versions: v, watchers: map[string]map[*Watch]struct{}{}}
}

// Publish records that the change with the given version touched topics and
// wakes their watchers. Versions only go up: a stale publish (replayed by a
// replica feed) changes nothing it should not.
//
// The watchers are taken out under the lock and woken after it: a move
// wakes every device of a cluster (10,000), and each woken long-poll at
// once reads versions and registers again, which would otherwise queue
// behind the whole publish. A watcher that reads versions before its
// channel is closed already sees the new ones.
func (h *Hub) Publish(version uint64, topics []string) {
	h.mu.Lock()
	if version > h.global {
		h.global = version
	}
	n := 0
	for _, t := range topics {
		n += len(h.watchers[t])
	}
	fired := make([]*Watch, 0, n)
	for _, t := range topics {
		if version > h.versions[t] {
			h.versions[t] = version
		}
		for w := range h.watchers[t] {
			if h.removeLocked(w) {
				fired = append(fired, w)
			}
		}
	}
	h.mu.Unlock()
	for _, w := range fired {
		close(w.c)
	}
}

// Global is the version of the latest change published.
func (h *Hub) Global() uint64 {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.global
}

// Version is the newest version among topics (0 if none ever changed).
func (h *Hub) Version(topics ...string) uint64 {
	h.mu.RLock()
	defer h.mu.RUnlock()
	var v uint64
	for _, t := range topics {
		v = max(v, h.versions[t])
	}
	return v
}

// Watch is a registration for the next change of any of its topics.
type Watch struct {
	h      *Hub
	topics []string
	c      chan struct{}
	done   atomic.Bool // removed from the hub; set under h.mu, read without it by Stop
}

// Watch registers for the next change of any of topics. Call Stop when done.
func (h *Hub) Watch(topics ...string) *Watch {
	w := &Watch{h: h, topics: topics, c: make(chan struct{})}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, t := range topics {
		m := h.watchers[t]
		if m == nil {
			m = map[*Watch]struct{}{}
			h.watchers[t] = m
		}
		m[w] = struct{}{}
	}
	return w
}

// C is closed when one of the watch's topics changes.
func (w *Watch) C() <-chan struct{} { return w.c }

// Stop unregisters the watch. It is safe to call more than once. A fired
// watch is already unregistered, so stopping it takes no lock: after a move
// that is every woken long-poll.
func (w *Watch) Stop() {
	if w.done.Load() {
		return
	}
	w.h.mu.Lock()
	defer w.h.mu.Unlock()
	w.h.removeLocked(w)
}

// removeLocked unregisters w and reports whether it was registered (the
// caller that removed it is the one to close its channel, if anyone).
func (h *Hub) removeLocked(w *Watch) bool {
	if w.done.Load() {
		return false
	}
	w.done.Store(true)
	for _, t := range w.topics {
		if m := h.watchers[t]; m != nil {
			delete(m, w)
			if len(m) == 0 {
				delete(h.watchers, t)
			}
		}
	}
	return true
}

// Watchers is how many watches are registered (for tests and metrics).
func (h *Hub) Watchers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	seen := map[*Watch]struct{}{}
	for _, m := range h.watchers {
		for w := range m {
			seen[w] = struct{}{}
		}
	}
	return len(seen)
}
