package labbench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/runos/vpn/vpnd/localapi"
)

// Event is one status of a daemon's watch stream and when it arrived here.
type Event struct {
	At     time.Time
	Status localapi.Status
}

// WatchFunc follows a daemon's status stream: localapi.Client.Watch.
type WatchFunc func(ctx context.Context, fn func(*localapi.Status) bool) error

// Follower keeps reading one daemon's /v1/watch stream and timestamps every
// status as it arrives, so a benchmark can ask, after the fact, when a
// laptop first showed something (the new node with peerUp) without
// polling and without missing a state that came and went.
type Follower struct {
	name    string
	now     func() time.Time
	mu      sync.Mutex
	base    int     // index of events[0] in the whole stream
	events  []Event // since the last Mark
	latest  *Event
	changed chan struct{} // closed and replaced on every event and at the end
	err     error         // why the stream ended; nil while it runs
}

// Follow starts following a stream until ctx ends; name says whose stream
// it is in errors. now is the clock (time.Now outside tests).
func Follow(ctx context.Context, name string, watch WatchFunc, now func() time.Time) *Follower {
	f := &Follower{name: name, now: now, changed: make(chan struct{})}
	go func() {
		err := watch(ctx, func(st *localapi.Status) bool {
			f.add(Event{At: f.now(), Status: *st})
			return true
		})
		if err == nil {
			err = errors.New("stream ended")
		}
		f.mu.Lock()
		f.err = fmt.Errorf("watch %s: %w", f.name, err)
		close(f.changed)
		f.mu.Unlock()
	}()
	return f
}

func (f *Follower) add(e Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, e)
	f.latest = &f.events[len(f.events)-1]
	close(f.changed)
	f.changed = make(chan struct{})
}

// Mark returns a cursor after every status seen so far (and forgets them:
// Wait only looks at statuses that arrive after a mark).
func (f *Follower) Mark() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.base += len(f.events)
	if f.latest != nil {
		l := *f.latest
		f.latest = &l
	}
	f.events = nil
	return f.base
}

// Latest is the last status seen.
func (f *Follower) Latest() (Event, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.latest == nil {
		return Event{}, false
	}
	return *f.latest, true
}

// Wait returns the first status at or after cursor for which cond holds,
// with the time it arrived; it blocks until one does, the stream ends or
// ctx is done.
func (f *Follower) Wait(ctx context.Context, cursor int, cond func(*localapi.Status) bool) (Event, error) {
	next := cursor
	for {
		f.mu.Lock()
		if next < f.base {
			f.mu.Unlock()
			return Event{}, fmt.Errorf("watch %s: cursor %d is before the last mark %d", f.name, cursor, f.base)
		}
		for ; next-f.base < len(f.events); next++ {
			if e := f.events[next-f.base]; cond(&e.Status) {
				f.mu.Unlock()
				return e, nil
			}
		}
		ch, err := f.changed, f.err
		f.mu.Unlock()
		if err != nil {
			return Event{}, err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			last := "nothing yet"
			if e, ok := f.Latest(); ok {
				last = describe(&e.Status)
			}
			return Event{}, fmt.Errorf("watch %s: %w; last status: %s", f.name, ctx.Err(), last)
		}
	}
}

// Until returns the latest status if cond holds for it, else the first
// later one for which it does (as Wait).
func (f *Follower) Until(ctx context.Context, cond func(*localapi.Status) bool) (Event, error) {
	f.mu.Lock()
	if f.latest != nil && cond(&f.latest.Status) {
		e := *f.latest
		f.mu.Unlock()
		return e, nil
	}
	cursor := f.base + len(f.events)
	f.mu.Unlock()
	return f.Wait(ctx, cursor, cond)
}

// Cluster is a cluster's status in st.
func Cluster(st *localapi.Status, cid string) (localapi.ClusterStatus, bool) {
	for _, c := range st.Clusters {
		if c.CID == cid {
			return c, true
		}
	}
	return localapi.ClusterStatus{}, false
}

// UpOn holds when cid is connected with a live handshake with the server
// on node (any node when node is "").
func UpOn(cid, node string) func(*localapi.Status) bool {
	return func(st *localapi.Status) bool {
		c, ok := Cluster(st, cid)
		return ok && c.State == localapi.ClusterConnected && c.PeerUp && (node == "" || c.Server.NodeID == node)
	}
}

// Down holds when cid is neither wanted nor carrying traffic.
func Down(cid string) func(*localapi.Status) bool {
	return func(st *localapi.Status) bool {
		c, ok := Cluster(st, cid)
		return !ok || !c.Wanted && !c.PeerUp
	}
}

func describe(st *localapi.Status) string {
	s := "session " + st.Session.State
	for _, c := range st.Clusters {
		s += fmt.Sprintf("; %s %s on %s peerUp=%t", c.CID, c.State, c.Server.NodeID, c.PeerUp)
		if c.Error != "" {
			s += " (" + c.Error + ")"
		}
	}
	return s
}
