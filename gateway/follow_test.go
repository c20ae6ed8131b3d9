package gateway

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/runos/vpn/api"
)

// streamingControl is fakeControl with the push stream of the gateway
// map: every new version on one call, until ctx ends or the test drops it.
type streamingControl struct {
	*fakeControl
	noStreams bool     // answer as a control older than streams: one map, ErrNoStream
	streams   []uint64 // the since of every stream opened
	drop      chan struct{}
}

func (c *streamingControl) WatchGatewayMap(ctx context.Context, since uint64, each func(*api.GatewayMap) error) error {
	c.mu.Lock()
	c.streams = append(c.streams, since)
	noStreams := c.noStreams
	c.mu.Unlock()
	if noStreams {
		m, err := c.fakeControl.GatewayMap(ctx, since, 0)
		if err != nil {
			return err
		}
		if err := each(m); err != nil {
			return err
		}
		return api.ErrNoStream
	}
	for {
		c.mu.Lock()
		for c.cur.Version == since {
			ch := c.changed
			c.mu.Unlock()
			select {
			case <-ch:
			case <-c.drop:
				return errors.New("connection reset by peer")
			case <-ctx.Done():
				return ctx.Err()
			}
			c.mu.Lock()
		}
		m := c.cur
		if m.Serve != nil {
			s := *m.Serve
			m.Serve = &s
		}
		c.mu.Unlock()
		if err := each(&m); err != nil {
			return err
		}
		since = m.Version
	}
}

func (c *streamingControl) opened() []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]uint64(nil), c.streams...)
}

// The gateway follows its map on one stream; a dropped stream is opened
// again from the last version seen.
func TestFollowByStreamResumes(t *testing.T) {
	sc := &streamingControl{drop: make(chan struct{})}
	h := start(t, func(c *Config) { sc.fakeControl = newFakeControl("n1"); c.Control = sc })
	h.ctl = sc.fakeControl
	h.ctl.waitReport(t, "for map 1", atVersion(1))
	p1, _ := peer(t, "dev1", "100.96.0.2")
	v := h.ctl.set(service(api.GatewayActive, p1))
	h.ctl.waitReport(t, "serving", func(r api.GatewayReport) bool { return r.MapVersion == v && r.Listening })
	if got := sc.opened(); len(got) != 1 || got[0] != 0 {
		t.Fatalf("streams opened from %v, want one from 0", got)
	}
	sc.drop <- struct{}{} // the connection drops
	v2 := h.ctl.set(service(api.GatewayActive))
	h.ctl.waitReport(t, "after the drop", atVersion(v2))
	if got := sc.opened(); len(got) != 2 || got[1] != v {
		t.Fatalf("streams opened from %v, want the second from %d", got, v)
	}
	h.ctl.mu.Lock()
	polls := len(h.ctl.sinces)
	h.ctl.mu.Unlock()
	if polls != 0 {
		t.Errorf("%d long-polls besides the stream", polls)
	}
}

// A control older than streams: the gateway says so once and long-polls.
func TestFollowFallsBackToLongPolls(t *testing.T) {
	sc := &streamingControl{noStreams: true}
	h := start(t, func(c *Config) { sc.fakeControl = newFakeControl("n1"); c.Control = sc })
	h.ctl = sc.fakeControl
	h.ctl.waitReport(t, "for map 1", atVersion(1))
	for range 3 {
		v := h.ctl.set(nil)
		h.ctl.waitReport(t, "a change", atVersion(v))
	}
	if n := strings.Count(h.logs.String(), "control does not stream the gateway map: long-polling instead"); n != 1 {
		t.Errorf("the fallback warning logged %d times", n)
	}
	if got := sc.opened(); len(got) != 1 {
		t.Errorf("streams tried %d times without a failure between", len(got))
	}
}

// --long-poll: never a stream.
func TestFollowByLongPollsWhenAsked(t *testing.T) {
	sc := &streamingControl{}
	h := start(t, func(c *Config) { sc.fakeControl = newFakeControl("n1"); c.Control = sc; c.LongPoll = true })
	h.ctl = sc.fakeControl
	h.ctl.waitReport(t, "for map 1", atVersion(1))
	v := h.ctl.set(nil)
	h.ctl.waitReport(t, "a change", atVersion(v))
	if got := sc.opened(); len(got) != 0 {
		t.Errorf("streams opened: %v", got)
	}
}
