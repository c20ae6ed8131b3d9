// Package hub is control's change hub (docs/internals.md "Push"). Every
// committed change carries the global version it was given and the topics it
// concerns (device:<id>, gateway:<cid>/<nid>, cluster:<cid>, service:<id>,
// move:<id>, session:<id>, account:<aid>,
// policy:<aid>). The hub keeps, per topic, the version of its
// latest change and wakes only the waiters of the topics a change concerns,
// so a move wakes the devices of one cluster and nobody else.
//
// The hub holds no documents: a long-poll registers a Watch, reads its
// document (and the document's version) from the store, and sleeps on the
// Watch only if that version is not newer than what the caller has seen.
// Registering before reading is what makes it race-free: a commit after the
// read is published after the registration, so it wakes the watch. A
// stream holds a Sub instead: a standing registration told of every
// publish on its topics, so it is registered once, not after every wake.
//
// With several control replicas over PostgreSQL, each replica's hub gets
// its own changes from its server after each commit and every other
// replica's from control/notify (LISTEN/NOTIFY, with a catch-up read after
// a reconnect); Publish takes the same change more than once, and changes
// out of order, without waking anyone wrongly or going backwards.
package hub

import (
	"sync"
	"sync/atomic"
	"time"
)

// Topic names.
func Device(id string) string        { return "device:" + id }
func Session(id string) string       { return "session:" + id }
func Cluster(cid string) string      { return "cluster:" + cid }
func Service(id string) string       { return "service:" + id }
func Move(id string) string          { return "move:" + id }
func Gateway(cid, nid string) string { return "gateway:" + cid + "/" + nid }

// GatewayAck is touched when a node's gateway reports it has acted on its
// latest map (control/server joinack.go): a join waits on it.
func GatewayAck(cid, nid string) string { return "gatewayack:" + cid + "/" + nid }

// Account is what the console of an account follows: touched by every
// audit entry of the account and by the handshakes and sessions of its
// devices (control/audit, control/console).
func Account(aid string) string { return "account:" + aid }

// Policy is touched by every change of an account's access policy or of
// its groups' members: what gateways enforcing the policy follow.
func Policy(aid string) string { return "policy:" + aid }

// Hub fans changes out to watchers. The zero value is not usable; use New.
type Hub struct {
	mu       sync.RWMutex // guards topics, every Topic's watches and subs, watching, subscribed and seq
	global   atomic.Uint64
	topics   map[string]*Topic
	watching int    // registered watches
	subbed   int    // standing subscriptions (streams)
	seq      uint64 // publishes so far: a Sub on two topics of one publish is told once
	hooks    []func(version uint64, topics []string)
	fanOut   atomic.Pointer[func(time.Duration)]
}

// ObserveFanOut has f called with each publish's fan-out: the time from
// the publish (the commit) until every long-poll it woke said Answered.
// For control's metrics; nothing is measured without it.
func (h *Hub) ObserveFanOut(f func(time.Duration)) { h.fanOut.Store(&f) }

// wave is one publish's wake-up of its watchers.
type wave struct {
	at   time.Time
	left atomic.Int64
	done func(time.Duration)
}

// Topic is one topic's state in the hub. A long-poll keeps the topics of
// its document (a device's map: its device, its session, its clusters) and
// checks their versions without the hub's lock or a lookup by name: after
// a move, 10,000 of them do so at once.
type Topic struct {
	name    string
	version atomic.Uint64       // stored under Hub.mu, loaded without it
	watches map[*Watch]struct{} // under Hub.mu; kept when empty, for the next poll
	subs    map[*Sub]struct{}   // under Hub.mu: the streams that follow it
}

// Name is the topic's name, e.g. device:<id>.
func (t *Topic) Name() string { return t.name }

// Version is the version of the topic's latest change (0 if none).
func (t *Topic) Version() uint64 { return t.version.Load() }

// Newest is the newest version among topics.
func Newest(topics ...*Topic) uint64 {
	var v uint64
	for _, t := range topics {
		v = max(v, t.Version())
	}
	return v
}

// New returns a hub that starts from the versions the store holds.
func New(global uint64, versions map[string]uint64) *Hub {
	h := &Hub{topics: make(map[string]*Topic, len(versions))}
	h.global.Store(global)
	for k, v := range versions {
		h.topicLocked(k).version.Store(v)
	}
	return h
}

// Topic returns the topic named name, the same one for as long as the hub
// lives. Topics are never dropped: their versions are what makes a
// long-poll's "since" meaningful.
func (h *Hub) Topic(name string) *Topic {
	h.mu.RLock()
	t := h.topics[name]
	h.mu.RUnlock()
	if t != nil {
		return t
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.topicLocked(name)
}

func (h *Hub) topicLocked(name string) *Topic {
	t := h.topics[name]
	if t == nil {
		t = &Topic{name: name}
		h.topics[name] = t
	}
	return t
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
	if version > h.global.Load() {
		h.global.Store(version)
	}
	h.seq++
	ts := make([]*Topic, len(topics))
	n, ns := 0, 0
	for i, name := range topics {
		t := h.topicLocked(name)
		if version > t.version.Load() {
			t.version.Store(version)
		}
		ts[i] = t
		n += len(t.watches)
		ns += len(t.subs)
	}
	fired := make([]*Watch, 0, n)
	var told []*Sub
	if ns > 0 {
		told = make([]*Sub, 0, ns)
	}
	for _, t := range ts {
		for w := range t.watches {
			if h.removeLocked(w) {
				fired = append(fired, w)
			}
		}
		for sb := range t.subs {
			if sb.seq != h.seq {
				sb.seq = h.seq
				told = append(told, sb)
			}
		}
	}
	hooks := h.hooks
	h.mu.Unlock()
	var wv *wave
	if f := h.fanOut.Load(); f != nil && len(fired)+len(told) > 0 {
		wv = &wave{at: time.Now(), done: *f}
		wv.left.Store(int64(len(fired) + len(told)))
		for _, w := range fired {
			w.wave = wv // before the close: the woken reader sees it
		}
	}
	for _, w := range fired {
		close(w.c)
	}
	for _, sb := range told {
		sb.f(Wake{wv})
	}
	for _, f := range hooks {
		f(version, topics)
	}
}

// OnPublish calls f after every Publish, in the publisher's goroutine, so
// f must only take note (control's server re-arms timers from it).
func (h *Hub) OnPublish(f func(version uint64, topics []string)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hooks = append(h.hooks, f)
}

// Global is the version of the latest change published.
func (h *Hub) Global() uint64 { return h.global.Load() }

// Version is the newest version among the topics named (0 if none ever
// changed). A caller that keeps a *Topic reads it without the lookup.
func (h *Hub) Version(names ...string) uint64 {
	h.mu.RLock()
	defer h.mu.RUnlock()
	var v uint64
	for _, name := range names {
		if t := h.topics[name]; t != nil {
			v = max(v, t.Version())
		}
	}
	return v
}

// Watch is a registration for the next change of any of its topics.
type Watch struct {
	h      *Hub
	topics []*Topic
	c      chan struct{}
	done   atomic.Bool // removed from the hub; set under h.mu, read without it by Stop
	wave   *wave       // the publish that fired it, when fan-outs are observed
	told   atomic.Bool // Answered was called
}

// Answered tells the hub that the long-poll this watch woke has written
// its answer (or gone back to waiting): the last of a publish's watches
// to say so ends its fan-out. Only a fired watch counts; calling it
// again, or on a watch that did not fire, does nothing.
func (w *Watch) Answered() {
	wv := w.wave
	if wv == nil || w.told.Swap(true) {
		return
	}
	if wv.left.Add(-1) == 0 {
		wv.done(time.Since(wv.at))
	}
}

// Watch registers for the next change of any of topics. Call Stop when done.
func (h *Hub) Watch(topics ...*Topic) *Watch {
	w := &Watch{h: h, topics: topics, c: make(chan struct{})}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, t := range topics {
		if t.watches == nil {
			t.watches = map[*Watch]struct{}{}
		}
		t.watches[w] = struct{}{}
	}
	h.watching++
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
		delete(t.watches, w)
	}
	h.watching--
	return true
}

// Watchers is how many watches are registered (for tests and metrics).
func (h *Hub) Watchers() int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.watching
}

// Sub is a standing registration, what a stream holds for as long as it
// is open: unlike a Watch it is not used up by a publish, so a stream
// that has just written a change is already registered for the next one
// (nothing to register again after a move's fan-out, and no window in
// which a change could pass unseen).
type Sub struct {
	h      *Hub
	f      func(Wake)
	topics []*Topic // under h.mu
	seq    uint64   // the last publish that told it, under h.mu
	done   bool     // under h.mu
}

// Wake is one publish's news for a Sub. Answered must be called exactly
// once, when the stream has written what the change gave it (or found
// nothing newer to write): the last of a publish's wakes and watches to be
// answered ends its fan-out.
type Wake struct{ wv *wave }

// Answered tells the hub this wake is dealt with.
func (w Wake) Answered() {
	if w.wv != nil && w.wv.left.Add(-1) == 0 {
		w.wv.done(time.Since(w.wv.at))
	}
}

// Subscribe calls f after every publish that touches one of topics, once
// per publish, in the publisher's goroutine after the hub's lock is
// released: f must only take note (start or signal the stream's writer)
// and must not block. Call Stop when done.
func (h *Hub) Subscribe(f func(Wake), topics ...*Topic) *Sub {
	sb := &Sub{h: h, f: f}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.subbed++
	sb.setLocked(topics)
	return sb
}

// Set replaces the topics the Sub follows (a device that joined a
// cluster follows the cluster too). A change published to a topic that is
// new here before Set is not told: compare the topics' versions after Set
// with what was read, as a long-poll does after registering.
func (sb *Sub) Set(topics ...*Topic) {
	sb.h.mu.Lock()
	defer sb.h.mu.Unlock()
	if sb.done || sameTopics(sb.topics, topics) {
		return
	}
	sb.clearLocked()
	sb.setLocked(topics)
}

func (sb *Sub) setLocked(topics []*Topic) {
	sb.topics = append(sb.topics[:0], topics...)
	for _, t := range sb.topics {
		if t.subs == nil {
			t.subs = map[*Sub]struct{}{}
		}
		t.subs[sb] = struct{}{}
	}
}

func (sb *Sub) clearLocked() {
	for _, t := range sb.topics {
		delete(t.subs, sb)
	}
}

// Stop ends the subscription: no publish after it returns tells it, but
// one already under way may still call f once (whose Wake must then be
// answered all the same). It is safe to call more than once.
func (sb *Sub) Stop() {
	sb.h.mu.Lock()
	defer sb.h.mu.Unlock()
	if sb.done {
		return
	}
	sb.done = true
	sb.clearLocked()
	sb.topics = nil
	sb.h.subbed--
}

func sameTopics(a, b []*Topic) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Subscribed is how many subscriptions are open (for tests and metrics).
func (h *Hub) Subscribed() int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.subbed
}
