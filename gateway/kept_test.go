package gateway

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/gateway/wgserver"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

func (f *fakeServer) last() (wgserver.Spec, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.applies) == 0 {
		return wgserver.Spec{}, false
	}
	return f.applies[len(f.applies)-1], f.open
}

// waitPeers waits until the server was last given want peers (by device id).
func waitPeers(t *testing.T, f *fakeServer, what string, want ...string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		s, open := f.last()
		var got []string
		for _, p := range s.Peers {
			got = append(got, p.DeviceID)
		}
		if open && len(got) == len(want) && (len(want) == 0 || equalSet(got, want)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the server has peers %v (open %v), want %v", what, got, open, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func equalSet(a, b []string) bool {
	m := map[string]bool{}
	for _, x := range a {
		m[x] = true
	}
	for _, x := range b {
		if !m[x] {
			return false
		}
	}
	return len(a) == len(b)
}

// TestKeptMapServedAfterRestart: the gateway keeps control's last map;
// started again with control unreachable it serves its peers from it at
// once, drops each at its session's expiry, and control's first map then
// replaces the kept one.
func TestKeptMapServedAfterRestart(t *testing.T) {
	dir := t.TempDir()
	withDir := func(c *Config) { c.StateDir = dir }
	long, _ := peer(t, "d1", "100.96.0.2")
	long.ExpiresAt = time.Now().Add(time.Hour)
	short, _ := peer(t, "d2", "100.96.0.3")
	short.ExpiresAt = time.Now().Add(1500 * time.Millisecond)
	h := start(t, withDir)
	h.ctl.set(service(api.GatewayActive, long, short))
	waitPeers(t, h.srv, "control's map", "d1", "d2")
	if fi, err := os.Stat(filepath.Join(dir, KeptFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("kept map: %v %v", fi, err)
	}
	h.stop()
	<-h.done
	h.done <- nil // for the cleanup's receive

	down := newFakeControl("n1")
	down.failMaps = 1 << 30
	h2 := start(t, func(c *Config) { withDir(c); c.Control = down })
	waitPeers(t, h2.srv, "the kept map, control down", "d1", "d2")
	waitPeers(t, h2.srv, "d2's session over", "d1")

	other, _ := peer(t, "d3", "100.96.0.4")
	other.ExpiresAt = time.Now().Add(time.Hour)
	down.mu.Lock()
	down.failMaps = 0
	down.mu.Unlock()
	down.set(service(api.GatewayActive, other))
	waitPeers(t, h2.srv, "control's map again", "d3")
}

// TestKeptEndpointsReachedAfterRestart: the kept map carries where each
// device last sent from; started again with control unreachable, the
// gateway handshakes to them first (their sessions died with the old
// server) instead of waiting for the devices' retries.
func TestKeptEndpointsReachedAfterRestart(t *testing.T) {
	dir := t.TempDir()
	withDir := func(c *Config) { c.StateDir = dir }
	p, key := peer(t, "d1", "100.96.0.2")
	p.ExpiresAt = time.Now().Add(time.Hour)
	ep := netip.MustParseAddrPort("198.51.100.7:51820")
	h := start(t, withDir)
	h.srv.mu.Lock()
	h.srv.endpoints = map[wgtypes.Key]netip.AddrPort{key: ep}
	h.srv.mu.Unlock()
	h.ctl.set(service(api.GatewayActive, p))
	waitPeers(t, h.srv, "control's map", "d1")
	deadline := time.Now().Add(20 * time.Second)
	for {
		k, ok, err := loadKept(dir, "n1")
		if err != nil {
			t.Fatal(err)
		}
		if ok && k.endpoints()[key] == ep {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the device's endpoint never kept: %+v", k.Endpoints)
		}
		time.Sleep(5 * time.Millisecond)
	}
	h.stop()
	<-h.done
	h.done <- nil

	down := newFakeControl("n1")
	down.failMaps = 1 << 30
	h2 := start(t, func(c *Config) { withDir(c); c.Control = down })
	waitPeers(t, h2.srv, "the kept map, control down", "d1")
	for deadline = time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		h2.srv.mu.Lock()
		reached := slices.Clone(h2.srv.reached)
		h2.srv.mu.Unlock()
		if len(reached) == 1 && reached[0][key] == ep {
			break
		}
		if len(reached) > 1 || time.Now().After(deadline) {
			t.Fatalf("Reach calls after the restart: %v, want one to %v", reached, ep)
		}
	}
}

// TestKeptPeerWithoutExpiryNotServed: a kept map of an older control
// (peers without expiries) serves none of them after a restart.
func TestKeptPeerWithoutExpiryNotServed(t *testing.T) {
	p, _ := peer(t, "d1", "100.96.0.2")
	m := &api.GatewayMap{Version: 3, NodeID: "n1", CID: "ky3", Serve: service(api.GatewayActive, p)}
	if got, _ := unexpired(m, time.Now(), true); len(got.Serve.Peers) != 0 {
		t.Errorf("kept: %+v", got.Serve.Peers)
	}
	if got, _ := unexpired(m, time.Now(), false); len(got.Serve.Peers) != 1 {
		t.Errorf("live: %+v", got.Serve.Peers)
	}
}

func TestParseKeptRefuses(t *testing.T) {
	p, _ := peer(t, "d1", "100.96.0.2")
	good := keptMap{ReceivedAt: time.Now(), Map: api.GatewayMap{Version: 3, NodeID: "n1", CID: "ky3", Serve: service(api.GatewayActive, p)}}
	b, _ := json.Marshal(good)
	if _, err := parseKept(b, "n1"); err != nil {
		t.Fatalf("good: %v", err)
	}
	if _, err := parseKept(b, "n2"); err == nil {
		t.Error("another node's map accepted")
	}
	bad := good
	bad.Map.Serve = service("boss", p)
	b, _ = json.Marshal(bad)
	if _, err := parseKept(b, "n1"); err == nil {
		t.Error("a map planFor refuses accepted")
	}
	if _, err := parseKept(make([]byte, keptMaxSize+1), "n1"); err == nil {
		t.Error("an oversized file accepted")
	}
}

// FuzzParseKept: whatever is on disk, parseKept errs or returns a map that
// planFor accepts, and never panics.
func FuzzParseKept(f *testing.F) {
	good, _ := json.Marshal(keptMap{ReceivedAt: time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC),
		Map: api.GatewayMap{Version: 3, NodeID: "n1", CID: "ky3", Serve: service(api.GatewayActive,
			api.GatewayPeer{DeviceID: "d1", PublicKey: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", Address: "100.96.0.2"})}})
	f.Add(good)
	f.Add([]byte(`{"receivedAt":"2026-01-01T00:00:00Z","map":{"nodeId":"n1"},"endpoints":{"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=":"198.51.100.7:51820","x":"y"}}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"receivedAt":"2026-01-01T00:00:00Z","map":{"nodeId":"n1"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := parseKept(b, "n1")
		if err != nil {
			return
		}
		if _, err := planFor(&k.Map); err != nil {
			t.Fatalf("accepted a map planFor refuses: %v", err)
		}
		for _, ep := range k.endpoints() {
			if !ep.IsValid() || ep.Port() == 0 {
				t.Fatalf("an endpoint that is none: %v", ep)
			}
		}
		if _, next := unexpired(&k.Map, time.Now(), true); !next.IsZero() && !next.After(time.Now().Add(-time.Second)) {
			t.Fatalf("next expiry %v is in the past", next)
		}
	})
}

// TestKeepsLater: only a map that adds peers and changes nothing else may
// reach the kept file after it is applied.
func TestKeepsLater(t *testing.T) {
	p1, _ := peer(t, "d1", "100.96.0.2")
	p1.ExpiresAt = time.Now().Add(time.Hour)
	p2, _ := peer(t, "d2", "100.96.0.3")
	p2.ExpiresAt = time.Now().Add(time.Hour)
	m := func(s *api.GatewayService) *api.GatewayMap {
		return &api.GatewayMap{Version: 2, NodeID: "n1", CID: "ky3", Serve: s}
	}
	prev := m(service(api.GatewayActive, p1))
	shorter := p1
	shorter.ExpiresAt = p1.ExpiresAt.Add(-time.Minute)
	narrower := service(api.GatewayActive, p1, p2)
	narrower.Policy = "allow group ops to 10.96.0.0/12 port 443"
	moved := service(api.GatewayDraining, p1, p2)
	for _, c := range []struct {
		name       string
		prev, next *api.GatewayMap
		want       bool
	}{
		{"a peer added", prev, m(service(api.GatewayActive, p1, p2)), true},
		{"the same map again", prev, m(service(api.GatewayActive, p1)), true},
		{"nothing known on disk", nil, m(service(api.GatewayActive, p1, p2)), false},
		{"a peer removed", m(service(api.GatewayActive, p1, p2)), m(service(api.GatewayActive, p2)), false},
		{"a peer removed, another added", prev, m(service(api.GatewayActive, p2)), false},
		{"a session shortened", prev, m(service(api.GatewayActive, shorter, p2)), false},
		{"a policy set", prev, m(narrower), false},
		{"the role changed", prev, m(moved), false},
		{"serving stopped", prev, m(nil), false},
		{"another node's", prev, &api.GatewayMap{Version: 3, NodeID: "n2", CID: "ky3", Serve: service(api.GatewayActive, p1, p2)}, false},
	} {
		if got := keepsLater(c.prev, c.next); got != c.want {
			t.Errorf("%s: keepsLater = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestKeptFileOrder: a map that only adds a device is applied and reported
// before its fsync (a join waits for that report), and then kept; a map
// that removes one is on disk before the server drops it, so a crash in
// between can never bring the removed device back from the file.
func TestKeptFileOrder(t *testing.T) {
	dir := t.TempDir()
	h := start(t, func(c *Config) { c.StateDir = dir })
	onDisk := func() []string {
		k, ok, err := loadKept(dir, "n1")
		if err != nil || !ok || k.Map.Serve == nil {
			return nil
		}
		var ids []string
		for _, p := range k.Map.Serve.Peers {
			ids = append(ids, p.DeviceID)
		}
		return ids
	}
	var mu sync.Mutex
	var seen [][]string // the kept file's devices at each Apply
	h.srv.mu.Lock()
	h.srv.onApply = func(wgserver.Spec) {
		mu.Lock()
		seen = append(seen, onDisk())
		mu.Unlock()
	}
	h.srv.mu.Unlock()
	atApply := func(what string, v uint64, want ...string) {
		t.Helper()
		h.ctl.waitReport(t, what, func(r api.GatewayReport) bool { return r.MapVersion == v })
		mu.Lock()
		defer mu.Unlock()
		if got := seen[len(seen)-1]; !equalSet(got, want) {
			t.Errorf("%s: the kept file held %v when the server took the map, want %v", what, got, want)
		}
	}
	p1, _ := peer(t, "d1", "100.96.0.2")
	p1.ExpiresAt = time.Now().Add(time.Hour)
	p2, _ := peer(t, "d2", "100.96.0.3")
	p2.ExpiresAt = time.Now().Add(time.Hour)

	atApply("the first map (nothing on disk known: kept first)", h.ctl.set(service(api.GatewayActive, p1)), "d1")
	atApply("d2 added (kept after its report)", h.ctl.set(service(api.GatewayActive, p1, p2)), "d1")
	for deadline := time.Now().Add(20 * time.Second); !equalSet(onDisk(), []string{"d1", "d2"}); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("d2's map not kept after its report: the file holds %v", onDisk())
		}
	}
	atApply("d1 removed (kept first)", h.ctl.set(service(api.GatewayActive, p2)), "d2")
}
