package gateway

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/gateway/clusterdns"
	"github.com/runos/vpn/gateway/wgserver"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// fakeControl serves a GatewayMap with the long-poll's semantics and
// collects reports.
type fakeControl struct {
	mu       sync.Mutex
	cur      api.GatewayMap
	changed  chan struct{} // closed and replaced on every change
	sinces   []uint64
	failMaps int // fail this many polls first
	reports  chan api.GatewayReport
}

func newFakeControl(nodeID string) *fakeControl {
	return &fakeControl{
		cur:     api.GatewayMap{Version: 1, NodeID: nodeID, CID: "ky3"},
		changed: make(chan struct{}),
		reports: make(chan api.GatewayReport, 1000),
	}
}

func (c *fakeControl) set(serve *api.GatewayService) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cur.Version++
	c.cur.Serve = serve
	close(c.changed)
	c.changed = make(chan struct{})
	return c.cur.Version
}

func (c *fakeControl) GatewayMap(ctx context.Context, since uint64, wait time.Duration) (*api.GatewayMap, error) {
	c.mu.Lock()
	c.sinces = append(c.sinces, since)
	for c.cur.Version == since {
		ch := c.changed
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
			c.mu.Lock()
			m := c.cur
			c.mu.Unlock()
			return &m, nil
		}
		c.mu.Lock()
	}
	if c.failMaps > 0 { // the connection drops just as the change arrives
		c.failMaps--
		c.mu.Unlock()
		return nil, errors.New("connection reset by peer")
	}
	m := c.cur
	if m.Serve != nil {
		s := *m.Serve
		m.Serve = &s
	}
	c.mu.Unlock()
	return &m, nil
}

func (c *fakeControl) GatewayReport(ctx context.Context, r api.GatewayReport) error {
	c.reports <- r
	return nil
}

// waitReport returns the first report that satisfies ok.
func (c *fakeControl) waitReport(t *testing.T, what string, ok func(api.GatewayReport) bool) api.GatewayReport {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case r := <-c.reports:
			if ok(r) {
				return r
			}
		case <-deadline:
			t.Fatalf("no report %s", what)
		}
	}
}

// fakeServer stands in for wgserver.Server.
type fakeServer struct {
	mu         sync.Mutex
	opens      int
	closes     int
	applies    []wgserver.Spec
	onlyPeers  []bool // for each of applies: through ApplyPeers
	failApply  int    // fail this many Applies (either kind)
	open       bool
	handshakes map[wgtypes.Key]time.Time
	endpoints  map[wgtypes.Key]netip.AddrPort   // what State says the peers sent from
	reached    []map[wgtypes.Key]netip.AddrPort // each Reach call's endpoints
	onApply    func(wgserver.Spec)              // runs inside each Apply (under mu)
}

func (f *fakeServer) openFunc(name string, key wgtypes.Key, _ *slog.Logger) (Server, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.opens++
	f.open = true
	f.handshakes = map[wgtypes.Key]time.Time{}
	return fakeHandle{f}, nil
}

func (f *fakeServer) setHandshake(k wgtypes.Key, t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.handshakes[k] = t
}

func (f *fakeServer) counts() (opens, closes, applies int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.opens, f.closes, len(f.applies)
}

type fakeHandle struct{ f *fakeServer }

func (h fakeHandle) Apply(s wgserver.Spec) error      { return h.apply(s, false) }
func (h fakeHandle) ApplyPeers(s wgserver.Spec) error { return h.apply(s, true) }

func (h fakeHandle) apply(s wgserver.Spec, onlyPeers bool) error {
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	if h.f.failApply > 0 {
		h.f.failApply--
		return errors.New("UDP port 32768 is already in use on this node")
	}
	h.f.applies = append(h.f.applies, s)
	h.f.onlyPeers = append(h.f.onlyPeers, onlyPeers)
	if h.f.onApply != nil {
		h.f.onApply(s)
	}
	for _, p := range s.Peers {
		if _, ok := h.f.handshakes[p.PublicKey]; !ok {
			h.f.handshakes[p.PublicKey] = time.Time{}
		}
	}
	return nil
}

func (h fakeHandle) State() (wgserver.State, error) {
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	st := wgserver.State{Index: 7, Handshakes: map[wgtypes.Key]time.Time{}}
	if n := len(h.f.applies); n > 0 && h.f.open {
		st.Listening = true
		st.ListenPort = h.f.applies[n-1].Port
	}
	for k, v := range h.f.handshakes {
		st.Handshakes[k] = v
	}
	st.Endpoints = maps.Clone(h.f.endpoints)
	return st, nil
}

func (h fakeHandle) Reach(eps map[wgtypes.Key]netip.AddrPort) error {
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	h.f.reached = append(h.f.reached, maps.Clone(eps))
	return nil
}

func (h fakeHandle) Close() error {
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	h.f.closes++
	h.f.open = false
	return nil
}

// fakeDNS records zones.
type fakeDNS struct {
	mu     sync.Mutex
	zones  []*clusterdns.Zone
	closes int
}

func (d *fakeDNS) Set(z *clusterdns.Zone) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.zones = append(d.zones, z)
	return nil
}

func (d *fakeDNS) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closes++
	return nil
}
