package labbench

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runos/vpn/vpnd/localapi"
)

// fakeStream is a status stream the test feeds by hand.
type fakeStream struct {
	ch  chan *localapi.Status
	end chan error
}

func newFakeStream() *fakeStream {
	return &fakeStream{ch: make(chan *localapi.Status), end: make(chan error, 1)}
}

func (s *fakeStream) watch(ctx context.Context, fn func(*localapi.Status) bool) error {
	for {
		select {
		case st := <-s.ch:
			if !fn(st) {
				return nil
			}
		case err := <-s.end:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func on(node string, up bool) *localapi.Status {
	return &localapi.Status{Clusters: []localapi.ClusterStatus{{CID: "ky3", State: localapi.ClusterConnected,
		Wanted: true, PeerUp: up, Server: localapi.Server{NodeID: node}}}}
}

// clock hands out one second per reading, so each event's time says
// which it was.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Second)
	return c.t
}

func TestFollowerWaitsForFirstMatchAfterMark(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := newFakeStream()
	clk := &clock{t: time.Unix(0, 0)}
	f := Follow(ctx, "client", s.watch, clk.now)

	s.ch <- on("n2", true) // already true before the mark: must not count
	s.ch <- on("n1", true)
	waitLatest(t, f, "n1")
	mark := f.Mark()

	got := make(chan Event, 1)
	go func() {
		e, err := f.Wait(ctx, mark, UpOn("ky3", "n2"))
		if err != nil {
			t.Error(err)
		}
		got <- e
	}()
	s.ch <- on("n2", false) // the new node, no handshake yet
	s.ch <- on("n2", true)  // the first match: the 4th reading
	s.ch <- on("n2", true)
	e := <-got
	if c, _ := Cluster(&e.Status, "ky3"); !c.PeerUp || c.Server.NodeID != "n2" || e.At != time.Unix(4, 0) {
		t.Errorf("Wait returned %+v at %v, want n2 up at the 4th reading", c, e.At)
	}
	// A second wait from the same mark finds the same first match.
	if e2, err := f.Wait(ctx, mark, UpOn("ky3", "n2")); err != nil || e2.At != e.At {
		t.Errorf("second Wait: %v at %v", err, e2.At)
	}
	if _, err := f.Wait(ctx, mark-1, UpOn("ky3", "n2")); err == nil {
		t.Error("Wait from before the mark did not fail")
	}
}

func TestFollowerStreamEndAndTimeout(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := newFakeStream()
	f := Follow(ctx, "client3", s.watch, time.Now)
	s.ch <- on("n1", true)
	waitLatest(t, f, "n1")

	short, cancelShort := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancelShort()
	_, err := f.Wait(short, f.Mark(), UpOn("ky3", "n2"))
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "client3") || !strings.Contains(err.Error(), "ky3 connected on n1") {
		t.Errorf("timeout error %v: want the laptop and its last status", err)
	}

	s.end <- errors.New("daemon went away")
	_, err = f.Wait(ctx, f.Mark(), UpOn("ky3", "n2"))
	if err == nil || !strings.Contains(err.Error(), "daemon went away") {
		t.Errorf("after the stream ended: %v", err)
	}
}

func TestPredicates(t *testing.T) {
	if !UpOn("ky3", "")(on("n1", true)) || UpOn("ky3", "n2")(on("n1", true)) || UpOn("ky3", "n1")(on("n1", false)) || UpOn("xym", "")(on("n1", true)) {
		t.Error("UpOn")
	}
	gone := &localapi.Status{}
	left := &localapi.Status{Clusters: []localapi.ClusterStatus{{CID: "ky3", State: localapi.ClusterDisconnected}}}
	if !Down("ky3")(gone) || !Down("ky3")(left) || Down("ky3")(on("n1", true)) {
		t.Error("Down")
	}
}

func waitLatest(t *testing.T, f *Follower, node string) {
	t.Helper()
	for range 1000 {
		if e, ok := f.Latest(); ok {
			if c, _ := Cluster(&e.Status, "ky3"); c.Server.NodeID == node {
				return
			}
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("the follower never saw ky3 on %s", node)
}

func TestFollowerUntil(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := newFakeStream()
	f := Follow(ctx, "client", s.watch, time.Now)
	s.ch <- on("n1", true)
	waitLatest(t, f, "n1")
	if e, err := f.Until(ctx, UpOn("ky3", "n1")); err != nil || !UpOn("ky3", "n1")(&e.Status) {
		t.Errorf("Until on what already holds: %v", err)
	}
	got := make(chan error, 1)
	go func() {
		_, err := f.Until(ctx, UpOn("ky3", "n2"))
		got <- err
	}()
	s.ch <- on("n2", true)
	if err := <-got; err != nil {
		t.Error(err)
	}
}
