package gateway

import (
	"encoding/json"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/gateway/reach"
	"github.com/runos/vpn/gateway/wgserver"
	"github.com/runos/vpn/policy"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

func TestPlanFor(t *testing.T) {
	p1, k1 := peer(t, "dev1", "100.96.0.2")
	p, err := planFor(&api.GatewayMap{Version: 3, Serve: service(api.GatewayStandby, p1)})
	if err != nil {
		t.Fatal(err)
	}
	if p.wg.Address.String() != "100.100.1.1/24" || p.wg.DevicePool.String() != "100.96.0.0/16" || p.wg.Port != 32768 {
		t.Fatalf("spec: %+v", p.wg)
	}
	if len(p.wg.Peers) != 1 || p.wg.Peers[0].PublicKey != k1 || p.wg.Peers[0].Address.String() != "100.96.0.2" || p.peerIDs[k1] != "dev1" {
		t.Fatalf("peers: %+v", p.wg.Peers)
	}
	if p.zone.Address().String() != "100.100.1.1" || p.zone.Domains()[0] != "ky3.rjwrn.example.com." {
		t.Fatalf("zone: %v %v", p.zone.Address(), p.zone.Domains())
	}
	if p, err := planFor(&api.GatewayMap{Version: 4}); p != nil || err != nil {
		t.Fatalf("serve nil: %v %v", p, err)
	}
}

func TestPlanForRefusals(t *testing.T) {
	p1, _ := peer(t, "dev1", "100.96.0.2")
	for _, tc := range []struct {
		mutate func(*api.GatewayService)
		want   string
	}{
		{func(s *api.GatewayService) { s.Role = "leader" }, `unknown role "leader"`},
		{func(s *api.GatewayService) { s.Port = 0 }, "port 0 is not a UDP port"},
		{func(s *api.GatewayService) { s.Port = 70000 }, "port 70000"},
		{func(s *api.GatewayService) { s.Subnet = "100.100.1.0" }, `subnet "100.100.1.0"`},
		{func(s *api.GatewayService) { s.Address = "100.100.2.1" }, "outside the subnet"},
		{func(s *api.GatewayService) { s.Address = "" }, "server address"},
		{func(s *api.GatewayService) { s.DevicePool = "x" }, "device pool"},
		{func(s *api.GatewayService) { s.DevicePool = "100.100.0.0/16" }, "overlaps the subnet"},
		{func(s *api.GatewayService) { s.Domains = []string{"bad name"} }, "not a valid DNS name"},
		{func(s *api.GatewayService) { s.Peers[0].PublicKey = "AAAA" }, "peer dev1: public key"},
		{func(s *api.GatewayService) { s.Peers[0].Address = "10.0.0.1" }, "outside the device pool"},
		{func(s *api.GatewayService) { s.Peers[0].Address = "nope" }, `peer dev1: address "nope"`},
		{func(s *api.GatewayService) { s.Peers = append(s.Peers, s.Peers[0]) }, "listed twice"},
		{func(s *api.GatewayService) {
			q, _ := peer(t, "dev2", s.Peers[0].Address)
			s.Peers = append(s.Peers, q)
		}, "share the address"},
	} {
		s := service(api.GatewayActive, p1)
		tc.mutate(s)
		_, err := planFor(&api.GatewayMap{Version: 9, Serve: s})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "map version 9: serve ky3 (service svc1)") {
			t.Errorf("want an error with %q, got %v", tc.want, err)
		}
	}
}

func TestSamePeers(t *testing.T) {
	p1, _ := peer(t, "dev1", "100.96.0.2")
	p2, _ := peer(t, "dev2", "100.96.0.3")
	a, _ := planFor(&api.GatewayMap{Serve: service(api.GatewayActive, p1, p2)})
	b, _ := planFor(&api.GatewayMap{Serve: service(api.GatewayDraining, p2, p1)})
	c, _ := planFor(&api.GatewayMap{Serve: service(api.GatewayActive, p1)})
	p2.Address = "100.96.0.9"
	d, _ := planFor(&api.GatewayMap{Serve: service(api.GatewayActive, p1, p2)})
	if !samePeers(a, b) || samePeers(a, c) || samePeers(a, d) || samePeers(a, nil) {
		t.Fatal("samePeers")
	}
}

// FuzzPlanFor decodes control's answer as the client does and plans it:
// never a panic, and whatever is accepted is self-consistent.
func FuzzPlanFor(f *testing.F) {
	k, _ := wgtypes.GeneratePrivateKey()
	good, _ := json.Marshal(api.GatewayMap{Version: 2, NodeID: "n1", CID: "ky3", Serve: service(api.GatewayActive,
		api.GatewayPeer{DeviceID: "d", PublicKey: k.PublicKey().String(), Address: "100.96.0.2"})})
	f.Add(good)
	f.Add([]byte(`{"version":1,"serve":null}`))
	f.Add([]byte(`{"serve":{"role":"standby","port":1,"subnet":"::/0","address":"::1","devicePool":"10.0.0.0/8","peers":[{}]}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var m api.GatewayMap
		if json.Unmarshal(body, &m) != nil {
			return
		}
		p, err := planFor(&m)
		if err != nil || p == nil {
			return
		}
		if !p.wg.Address.Masked().Contains(p.wg.Address.Addr()) || p.wg.Port < 1 || p.wg.Port > 65535 {
			t.Fatalf("accepted a bad spec: %+v", p.wg)
		}
		for _, pr := range p.wg.Peers {
			if !p.wg.DevicePool.Contains(pr.Address) {
				t.Fatalf("accepted a peer outside the pool: %+v", pr)
			}
		}
	})
}

func TestBuildReport(t *testing.T) {
	key, _ := wgtypes.GeneratePrivateKey()
	k1, _ := wgtypes.GeneratePrivateKey()
	k2, _ := wgtypes.GeneratePrivateKey()
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("x", 3600))
	st := &wgserver.State{Listening: true, ListenPort: 32768, Handshakes: map[wgtypes.Key]time.Time{
		k1.PublicKey(): at, k2.PublicKey(): {},
	}}
	r := buildReport(reportInputs{publicKey: key.PublicKey(), version: "v1", mapVersion: 5, serve: service(api.GatewayActive), state: st,
		errs: []error{nil, errors.New("cluster dns: busy")}})
	if r.PublicKey != key.PublicKey().String() || r.MapVersion != 5 || !r.Listening || r.ListenPort != 32768 || r.ServiceID != "svc1" {
		t.Fatalf("report: %+v", r)
	}
	if len(r.Handshakes) != 1 || r.Handshakes[0].PublicKey != k1.PublicKey().String() || !r.Handshakes[0].At.Equal(at) || r.Handshakes[0].At.Location() != time.UTC {
		t.Fatalf("handshakes (zero ones left out, UTC): %+v", r.Handshakes)
	}
	if r.Error != "cluster dns: busy" {
		t.Fatalf("error: %q", r.Error)
	}
	// Listening on another port than the map asks is not listening.
	s := service(api.GatewayActive)
	s.Port = 40000
	if r := buildReport(reportInputs{serve: s, state: st}); r.Listening {
		t.Fatal("listening on the wrong port reported as listening")
	}
	if r := buildReport(reportInputs{mapVersion: 1}); r.Listening || r.ListenPort != 0 || r.Handshakes != nil || r.Error != "" {
		t.Fatalf("not serving: %+v", r)
	}
}

func TestWatchPending(t *testing.T) {
	k1, _ := wgtypes.GeneratePrivateKey()
	k2, _ := wgtypes.GeneratePrivateKey()
	peers := []wgserver.Peer{{PublicKey: k1.PublicKey()}, {PublicKey: k2.PublicKey()}}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w := newWatch(t0)
	hs := map[wgtypes.Key]time.Time{k1.PublicKey(): t0.Add(-time.Second)}
	if !w.pending(t0.Add(time.Millisecond), peers, hs) {
		t.Fatal("no handshake since the change, yet not pending")
	}
	hs[k1.PublicKey()] = t0.Add(time.Second)
	if !w.pending(t0.Add(time.Second), peers, hs) {
		t.Fatal("one peer still missing, yet not pending")
	}
	hs[k2.PublicKey()] = t0.Add(2 * time.Second)
	if w.pending(t0.Add(2*time.Second), peers, hs) {
		t.Fatal("every peer handshook, yet pending")
	}
	delete(hs, k2.PublicKey())
	if w.pending(t0.Add(watchFor+time.Millisecond), peers, hs) {
		t.Fatal("pending past the deadline")
	}
	if (watch{}).pending(t0, peers, nil) {
		t.Fatal("the zero watch is pending")
	}
}

func TestNewHandshakes(t *testing.T) {
	k1, _ := wgtypes.GeneratePrivateKey()
	k2, _ := wgtypes.GeneratePrivateKey()
	t0 := time.Now()
	prev := map[wgtypes.Key]time.Time{k1.PublicKey(): t0}
	cur := map[wgtypes.Key]time.Time{k1.PublicKey(): t0, k2.PublicKey(): t0.Add(time.Second)}
	if got := newHandshakes(prev, cur); len(got) != 1 || got[0] != k2.PublicKey() {
		t.Fatalf("got %v", got)
	}
	cur[k2.PublicKey()] = time.Time{}
	if got := newHandshakes(nil, cur); len(got) != 1 || got[0] != k1.PublicKey() {
		t.Fatalf("zero times are not handshakes: %v", got)
	}
}

func TestMailboxKeepsLatest(t *testing.T) {
	m := newMailbox[int]()
	for i := range 5 {
		m.put(i)
	}
	if v := <-m.ch; v != 4 {
		t.Fatalf("got %d, want the latest", v)
	}
	select {
	case v := <-m.ch:
		t.Fatalf("a stale value %d was kept", v)
	default:
	}
}

func TestTrafficGrownCountsResetsFromZero(t *testing.T) {
	a, b := wgtypes.Key{1}, wgtypes.Key{2}
	prev := map[wgtypes.Key]wgserver.Traffic{a: {Rx: 100, Tx: 50}, b: {Rx: 10, Tx: 10}}
	cur := map[wgtypes.Key]wgserver.Traffic{a: {Rx: 130, Tx: 60}, b: {Rx: 4, Tx: 3}} // b was added again
	if rx, tx := trafficGrown(prev, cur); rx != 34 || tx != 13 {
		t.Errorf("grown %d/%d, want 34/13", rx, tx)
	}
}

// TestPlanForPolicy: a map with a policy compiles each peer's filter from
// its user and groups; a map without one filters nothing.
func TestPlanForPolicy(t *testing.T) {
	p1, _ := peer(t, "dev1", "100.96.0.2")
	p2, _ := peer(t, "dev2", "100.96.0.3")
	p1.User, p1.Groups = "ada@x", []string{"oncall"}
	p2.User = "bob@x"
	s := service(api.GatewayActive, p1, p2)
	s.Policy = "version 1\nallow group:oncall -> ky3: *\nallow user:bob@x -> ky3: 10.96.0.20:5432\n"
	p, err := planFor(&api.GatewayMap{Version: 5, Serve: s})
	if err != nil || p.filters == nil {
		t.Fatalf("plan = %+v, %v", p, err)
	}
	k := policy.Packet{Addr: netip.MustParseAddr("10.96.0.9"), Proto: policy.TCP, Port: 22}
	if ok, line := p.filters.Check(netip.MustParseAddr("100.96.0.2"), k); !ok || line != 2 {
		t.Errorf("oncall's device: %v by line %d", ok, line)
	}
	if ok, _ := p.filters.Check(netip.MustParseAddr("100.96.0.3"), k); ok {
		t.Error("bob's device reaches port 22")
	}
	s.Policy = ""
	if p, err := planFor(&api.GatewayMap{Version: 6, Serve: s}); err != nil || p.filters != nil {
		t.Fatalf("no policy: %+v, %v", p, err)
	}
	// A policy this gateway cannot read closes the filter but keeps the
	// peers following the map (a revocation must not wait on it).
	s.Policy = "version 7\nallow * -> ky3: 10.0.0.300\n"
	p, err = planFor(&api.GatewayMap{Version: 7, Serve: s})
	if err != nil || p.policyErr == nil || !strings.Contains(p.policyErr.Error(), "access policy: policy line 2") || len(p.wg.Peers) != 2 {
		t.Fatalf("unreadable policy: %+v, %v", p, err)
	}
	if ok, _ := p.filters.Check(netip.MustParseAddr("100.96.0.2"), k); ok {
		t.Error("with an unreadable policy a device's packet passed")
	}
}

// TestAddsPeers: only a plan that keeps every peer where it was, on the
// same port in the same role, lets the gateway report without reading the
// server first.
func TestAddsPeers(t *testing.T) {
	k1, k2 := wgtypes.Key{1}, wgtypes.Key{2}
	at := func(k wgtypes.Key, a string) wgserver.Peer {
		return wgserver.Peer{PublicKey: k, Address: netip.MustParseAddr(a)}
	}
	pl := func(role string, port int, peers ...wgserver.Peer) *plan {
		return &plan{role: role, wg: wgserver.Spec{Port: port, Peers: peers}}
	}
	prev := pl(api.GatewayActive, 32768, at(k1, "100.96.0.2"))
	for _, c := range []struct {
		name string
		prev *plan
		next *plan
		want bool
	}{
		{"a peer added", prev, pl(api.GatewayActive, 32768, at(k1, "100.96.0.2"), at(k2, "100.96.0.3")), true},
		{"the same peers", prev, pl(api.GatewayActive, 32768, at(k1, "100.96.0.2")), true},
		{"not serving before", nil, prev, false},
		{"a peer removed", prev, pl(api.GatewayActive, 32768), false},
		{"a peer readdressed", prev, pl(api.GatewayActive, 32768, at(k1, "100.96.0.9")), false},
		{"another port", prev, pl(api.GatewayActive, 32769, at(k1, "100.96.0.2"), at(k2, "100.96.0.3")), false},
		{"another role", prev, pl(api.GatewayDraining, 32768, at(k1, "100.96.0.2"), at(k2, "100.96.0.3")), false},
	} {
		if got := addsPeers(c.prev, c.next); got != c.want {
			t.Errorf("%s: addsPeers = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestOnlyPeersChange: a map that only adds peers on the same interface
// (address, device pool) is applied to the server as peers alone.
func TestOnlyPeersChange(t *testing.T) {
	k1, k2 := wgtypes.Key{1}, wgtypes.Key{2}
	at := func(k wgtypes.Key, a string) wgserver.Peer {
		return wgserver.Peer{PublicKey: k, Address: netip.MustParseAddr(a)}
	}
	pl := func(addr, pool string, prefixes []netip.Prefix, peers ...wgserver.Peer) *plan {
		return &plan{role: api.GatewayActive, wg: wgserver.Spec{Port: 32768, Address: netip.MustParsePrefix(addr), DevicePool: netip.MustParsePrefix(pool), Peers: peers},
			reach: reach.Spec{Server: netip.MustParsePrefix(addr).Addr(), DevicePool: netip.MustParsePrefix(pool), Prefixes: prefixes}}
	}
	svc := []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")}
	prev := pl("100.100.1.1/24", "100.96.0.0/16", svc, at(k1, "100.96.0.2"))
	for _, c := range []struct {
		name string
		next *plan
		want bool
	}{
		{"a peer added", pl("100.100.1.1/24", "100.96.0.0/16", svc, at(k1, "100.96.0.2"), at(k2, "100.96.0.3")), true},
		{"a peer removed", pl("100.100.1.1/24", "100.96.0.0/16", svc), false},
		{"another address", pl("100.100.2.1/24", "100.96.0.0/16", svc, at(k1, "100.96.0.2"), at(k2, "100.96.0.3")), false},
		{"another device pool", pl("100.100.1.1/24", "100.97.0.0/16", svc, at(k1, "100.96.0.2"), at(k2, "100.96.0.3")), false},
		// The server's change is peers alone; the forwarding takes the new
		// inside through its own Apply, which runs for every map.
		{"another inside", pl("100.100.1.1/24", "100.96.0.0/16", append(slices.Clone(svc), netip.MustParsePrefix("10.244.0.0/16")), at(k1, "100.96.0.2"), at(k2, "100.96.0.3")), true},
		{"nothing served before", nil, false},
	} {
		if c.next == nil {
			if onlyPeersChange(nil, prev) {
				t.Errorf("%s: true", c.name)
			}
			continue
		}
		if got := onlyPeersChange(prev, c.next); got != c.want {
			t.Errorf("%s: onlyPeersChange = %v, want %v", c.name, got, c.want)
		}
	}
}
