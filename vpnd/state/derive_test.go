package state

import (
	"encoding/json"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/dnsplit"
	"github.com/runos/vpn/platform/netmon"
	"github.com/runos/vpn/vpnd/localapi"
	"github.com/runos/vpn/vpnd/store"
	"github.com/runos/vpn/vpnd/wgcfg"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

var (
	t0   = time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	key1 = mustKey("n1")
	key2 = mustKey("n2")
	keyX = mustKey("xym")
)

func mustKey(seed string) wgtypes.Key {
	var k wgtypes.Key
	copy(k[:], seed)
	k[31] = 1
	return k
}

func vpn(node string, k wgtypes.Key, ep, subnet, addr string) api.VPNConfig {
	return api.VPNConfig{ServiceID: "s-" + subnet, NodeID: node, PublicKey: k.String(), Endpoint: ep, Subnet: subnet,
		Address: addr, DNS: addr, Domains: []string{"ky3.rjwrn.example.com"}, Ready: true}
}

var (
	ky3n1 = api.ClusterConfig{CID: "ky3", AID: "rjwrn", Name: "tc3-ky3", Domain: "ky3.rjwrn.example.com",
		VPN: vpn("n1", key1, "10.77.0.21:32768", "100.100.1.0/24", "100.100.1.1")}
	ky3n2 = api.ClusterConfig{CID: "ky3", AID: "rjwrn", Name: "tc3-ky3", Domain: "ky3.rjwrn.example.com",
		VPN: vpn("n2", key2, "198.51.100.22:32768", "100.100.1.0/24", "100.100.1.1")}
	xym = api.ClusterConfig{CID: "xym", AID: "rjwrn", Name: "tc2-xym", Domain: "xym.rjwrn.example.com",
		VPN: api.VPNConfig{NodeID: "n1", PublicKey: keyX.String(), Endpoint: "198.51.100.31:32768", Subnet: "100.100.2.0/24",
			Address: "100.100.2.1", DNS: "100.100.2.1", Domains: []string{"xym.rjwrn.example.com"}, Ready: true}}
	accounts = []api.Cluster{{CID: "ky3", Name: "tc3-ky3"}, {CID: "xym", Name: "tc2-xym"}, {CID: "abc", Name: "spare"}}
)

func signedInPrefs(wanted ...string) store.Prefs {
	return store.Prefs{APIURL: "https://198.51.100.10", AccessToken: "tok", ExpiresAt: t0.Add(20 * time.Hour),
		User: "alice@example.com", DeviceID: "d1", Wanted: wanted}
}

func dmap(cs ...api.ClusterConfig) *api.DeviceMap {
	return &api.DeviceMap{Version: 7, Device: api.Device{ID: "d1", Address: "100.96.0.2"}, Clusters: cs}
}

func device(peers ...wgcfg.PeerReport) wgcfg.Report {
	return wgcfg.Report{Interface: "wg1", Up: true, PublicKey: mustKey("me"),
		Addresses: []netip.Prefix{netip.MustParsePrefix("100.96.0.2/32")}, Peers: peers}
}

func peer(k wgtypes.Key, hs time.Time) wgcfg.PeerReport {
	return wgcfg.PeerReport{PublicKey: k, LastHandshake: hs, AddedAt: t0.Add(-time.Second)}
}

func base() Inputs {
	return Inputs{Now: t0, Version: "v1", Interface: "wg1", Accounts: accounts, Device: device()}
}

// want is the part of a cluster's status a case checks.
type want struct {
	state  string
	peerUp bool
	node   string
	err    string // substring; "" means no error
}

func TestDerive(t *testing.T) {
	for _, tc := range []struct {
		name     string
		in       func(*Inputs)
		session  string
		sessErr  string
		clusters map[string]want
		peers    []wgtypes.Key // Want's peers, in order
		dns      int           // Want's DNS routes
		warn     string
	}{
		{
			name:     "signed out",
			in:       func(in *Inputs) {},
			session:  localapi.SessionSignedOut,
			clusters: map[string]want{"abc": {state: "disconnected"}, "ky3": {state: "disconnected"}, "xym": {state: "disconnected"}},
		},
		{
			name:     "signed in, map not here yet",
			in:       func(in *Inputs) { in.Prefs = signedInPrefs("ky3") },
			session:  localapi.SessionSignedIn,
			clusters: map[string]want{"ky3": {state: "connecting"}, "xym": {state: "disconnected"}},
		},
		{
			name: "signed in, nothing wanted",
			in: func(in *Inputs) {
				in.Prefs = signedInPrefs()
				in.Map = dmap()
			},
			session:  localapi.SessionSignedIn,
			clusters: map[string]want{"ky3": {state: "disconnected"}},
		},
		{
			name: "connecting: joined, peer not on the device yet",
			in: func(in *Inputs) {
				in.Prefs = signedInPrefs("ky3")
				in.Map = dmap(ky3n1)
			},
			session:  localapi.SessionSignedIn,
			clusters: map[string]want{"ky3": {state: "connecting", node: "n1"}},
			peers:    []wgtypes.Key{key1},
			dns:      1,
		},
		{
			name: "connected, fresh handshake",
			in: func(in *Inputs) {
				in.Prefs = signedInPrefs("ky3")
				in.Map = dmap(ky3n1)
				in.Device = device(peer(key1, t0.Add(-10*time.Second)))
			},
			session:  localapi.SessionSignedIn,
			clusters: map[string]want{"ky3": {state: "connected", peerUp: true, node: "n1"}},
			peers:    []wgtypes.Key{key1},
			dns:      1,
		},
		{
			name: "connected, no handshake yet (within the grace)",
			in: func(in *Inputs) {
				in.Prefs = signedInPrefs("ky3")
				in.Map = dmap(ky3n1)
				in.Device = device(peer(key1, time.Time{}))
			},
			session:  localapi.SessionSignedIn,
			clusters: map[string]want{"ky3": {state: "connected", node: "n1"}},
			peers:    []wgtypes.Key{key1},
			dns:      1,
		},
		{
			name: "connected, no handshake after the grace",
			in: func(in *Inputs) {
				in.Prefs = signedInPrefs("ky3")
				in.Map = dmap(ky3n1)
				p := peer(key1, time.Time{})
				p.AddedAt = t0.Add(-time.Minute)
				in.Device = device(p)
			},
			session:  localapi.SessionSignedIn,
			clusters: map[string]want{"ky3": {state: "connected", node: "n1", err: "no handshake with the VPN server at 10.77.0.21:32768 yet: is UDP 32768 reachable"}},
			peers:    []wgtypes.Key{key1},
			dns:      1,
		},
		{
			name: "handshake 179 s old: still up",
			in: func(in *Inputs) {
				in.Prefs = signedInPrefs("ky3")
				in.Map = dmap(ky3n1)
				in.Device = device(peer(key1, t0.Add(-179*time.Second)))
			},
			session:  localapi.SessionSignedIn,
			clusters: map[string]want{"ky3": {state: "connected", peerUp: true, node: "n1"}},
			peers:    []wgtypes.Key{key1},
			dns:      1,
		},
		{
			name: "handshake older than 180 s: peerUp false",
			in: func(in *Inputs) {
				in.Prefs = signedInPrefs("ky3")
				in.Map = dmap(ky3n1)
				in.Device = device(peer(key1, t0.Add(-181*time.Second)))
			},
			session:  localapi.SessionSignedIn,
			clusters: map[string]want{"ky3": {state: "connected", node: "n1", err: "for more than 3m0s"}},
			peers:    []wgtypes.Key{key1},
			dns:      1,
		},
		{
			name: "handshake exactly 180 s old: peerUp false",
			in: func(in *Inputs) {
				in.Prefs = signedInPrefs("ky3")
				in.Map = dmap(ky3n1)
				in.Device = device(peer(key1, t0.Add(-180*time.Second)))
			},
			session:  localapi.SessionSignedIn,
			clusters: map[string]want{"ky3": {state: "connected", node: "n1", err: "no handshake"}},
			peers:    []wgtypes.Key{key1},
			dns:      1,
		},
		{
			name: "expired by the local clock: everything torn down, wanted kept",
			in: func(in *Inputs) {
				in.Prefs = signedInPrefs("ky3")
				in.Prefs.ExpiresAt = t0
				in.Map = dmap(ky3n1)
				in.Device = device(peer(key1, t0.Add(-time.Second)))
			},
			session:  localapi.SessionExpired,
			sessErr:  "your sign-in expired at 2026-07-01T12:00:00Z",
			clusters: map[string]want{"ky3": {state: "disconnected"}},
			warn:     "run `runos vpn up` to sign in again",
		},
		{
			name: "expired: control said session_expired",
			in: func(in *Inputs) {
				in.Prefs = signedInPrefs("ky3", "xym")
				in.SessionEnded = true
				in.SessionErr = "control ended the session: session expired"
				in.Map = dmap(ky3n1, xym)
			},
			session:  localapi.SessionExpired,
			sessErr:  "session expired",
			clusters: map[string]want{"ky3": {state: "disconnected"}, "xym": {state: "disconnected"}},
			warn:     "the session expired",
		},
		{
			name: "join error: unknown cid",
			in: func(in *Inputs) {
				in.Prefs = signedInPrefs("ky3", "zzz9")
				in.Map = dmap(ky3n1)
				in.JoinErrs = map[string]string{"zzz9": "cluster zzz9 not found"}
				in.Device = device(peer(key1, t0))
			},
			session: localapi.SessionSignedIn,
			clusters: map[string]want{"ky3": {state: "connected", peerUp: true, node: "n1"},
				"zzz9": {state: "error", err: "cluster zzz9 not found"}},
			peers: []wgtypes.Key{key1},
			dns:   1,
		},
		{
			name: "control unreachable: the tunnels keep working",
			in: func(in *Inputs) {
				in.Prefs = signedInPrefs("ky3")
				in.Map = dmap(ky3n1)
				in.ControlErr = "control https://198.51.100.10 unreachable: connection refused"
				in.Device = device(peer(key1, t0.Add(-time.Minute)))
			},
			session:  localapi.SessionSignedIn,
			sessErr:  "unreachable",
			clusters: map[string]want{"ky3": {state: "connected", peerUp: true, node: "n1"}},
			peers:    []wgtypes.Key{key1},
			dns:      1,
		},
		{
			name: "control unreachable before the first map",
			in: func(in *Inputs) {
				in.Prefs = signedInPrefs("ky3")
				in.ControlErr = "control https://198.51.100.10 unreachable: no route to host"
			},
			session:  localapi.SessionSignedIn,
			sessErr:  "no route to host",
			clusters: map[string]want{"ky3": {state: "connecting"}},
		},
		{
			name: "a move in flight: the map names n2, the device still has n1",
			in: func(in *Inputs) {
				in.Prefs = signedInPrefs("ky3")
				in.Map = dmap(ky3n2)
				in.Device = device(peer(key1, t0.Add(-time.Second)))
			},
			session:  localapi.SessionSignedIn,
			clusters: map[string]want{"ky3": {state: "connecting", node: "n2"}},
			peers:    []wgtypes.Key{key2},
			dns:      1,
		},
		{
			name: "a move applied, new handshake",
			in: func(in *Inputs) {
				in.Prefs = signedInPrefs("ky3")
				in.Map = dmap(ky3n2)
				in.Device = device(peer(key2, t0))
			},
			session:  localapi.SessionSignedIn,
			clusters: map[string]want{"ky3": {state: "connected", peerUp: true, node: "n2"}},
			peers:    []wgtypes.Key{key2},
			dns:      1,
		},
		{
			name: "the service has no serving gateway yet",
			in: func(in *Inputs) {
				in.Prefs = signedInPrefs("ky3")
				c := ky3n1
				c.VPN = api.VPNConfig{Subnet: "100.100.1.0/24", Ready: false}
				in.Map = dmap(c)
			},
			session:  localapi.SessionSignedIn,
			clusters: map[string]want{"ky3": {state: "connecting", err: "waiting for the cluster's VPN server"}},
		},
		{
			name: "two clusters connected",
			in: func(in *Inputs) {
				in.Prefs = signedInPrefs("ky3", "xym")
				in.Map = dmap(xym, ky3n1)
				in.Device = device(peer(key1, t0), peer(keyX, t0))
			},
			session: localapi.SessionSignedIn,
			clusters: map[string]want{"ky3": {state: "connected", peerUp: true, node: "n1"},
				"xym": {state: "connected", peerUp: true, node: "n1"}, "abc": {state: "disconnected"}},
			peers: []wgtypes.Key{key1, keyX},
			dns:   2,
		},
		{
			name: "joined on control but not wanted here: not configured",
			in: func(in *Inputs) {
				in.Prefs = signedInPrefs("ky3")
				in.Map = dmap(ky3n1, xym)
			},
			session:  localapi.SessionSignedIn,
			clusters: map[string]want{"ky3": {state: "connecting", node: "n1"}, "xym": {state: "disconnected"}},
			peers:    []wgtypes.Key{key1},
			dns:      1,
		},
		{
			name: "bad server key from control",
			in: func(in *Inputs) {
				in.Prefs = signedInPrefs("ky3")
				c := ky3n1
				c.VPN.PublicKey = "not-a-key"
				in.Map = dmap(c)
			},
			session:  localapi.SessionSignedIn,
			clusters: map[string]want{"ky3": {state: "error", node: "n1", err: "bad server key"}},
		},
		{
			name: "bad endpoint from control",
			in: func(in *Inputs) {
				in.Prefs = signedInPrefs("ky3")
				c := ky3n1
				c.VPN.Endpoint = "ingress.example:32768"
				in.Map = dmap(c)
			},
			session:  localapi.SessionSignedIn,
			clusters: map[string]want{"ky3": {state: "error", node: "n1", err: "bad endpoint"}},
		},
		{
			name: "a domain that would inject resolver lines",
			in: func(in *Inputs) {
				in.Prefs = signedInPrefs("ky3")
				c := ky3n1
				c.VPN.Domains = []string{"ky3.example.com\nnameserver 203.0.113.66"}
				in.Map = dmap(c)
			},
			session:  localapi.SessionSignedIn,
			clusters: map[string]want{"ky3": {state: "error", node: "n1", err: "bad domain"}},
		},
		{
			name: "two clusters with the same server key",
			in: func(in *Inputs) {
				in.Prefs = signedInPrefs("ky3", "xym")
				x := xym
				x.VPN.PublicKey = key1.String()
				in.Map = dmap(ky3n1, x)
			},
			session:  localapi.SessionSignedIn,
			clusters: map[string]want{"ky3": {state: "connecting", node: "n1"}, "xym": {state: "error", node: "n1", err: "same server key as ky3"}},
			peers:    []wgtypes.Key{key1},
			dns:      1,
		},
		{
			name: "two clusters with overlapping subnets",
			in: func(in *Inputs) {
				in.Prefs = signedInPrefs("ky3", "xym")
				x := xym
				x.VPN.Subnet, x.VPN.Address, x.VPN.DNS = "100.100.0.0/16", "100.100.2.1", "100.100.2.1"
				in.Map = dmap(ky3n1, x)
			},
			session:  localapi.SessionSignedIn,
			clusters: map[string]want{"ky3": {state: "connecting", node: "n1"}, "xym": {state: "error", node: "n1", err: "overlaps"}},
			peers:    []wgtypes.Key{key1},
			dns:      1,
		},
		{
			name: "last hour of the session warns",
			in: func(in *Inputs) {
				in.Prefs = signedInPrefs("ky3")
				in.Prefs.ExpiresAt = t0.Add(59 * time.Minute)
				in.Map = dmap(ky3n1)
			},
			session:  localapi.SessionSignedIn,
			clusters: map[string]want{"ky3": {state: "connecting", node: "n1"}},
			peers:    []wgtypes.Key{key1},
			dns:      1,
			warn:     "the session ends at 2026-07-01 12:59 UTC, in less than an hour",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := base()
			tc.in(&in)
			st := Derive(&in)
			if st.Session.State != tc.session {
				t.Errorf("session.state = %q, want %q", st.Session.State, tc.session)
			}
			if !strings.Contains(st.Session.Error, tc.sessErr) || (tc.sessErr == "" && st.Session.Error != "") {
				t.Errorf("session.error = %q, want %q", st.Session.Error, tc.sessErr)
			}
			byCID := map[string]localapi.ClusterStatus{}
			var order []string
			for _, c := range st.Clusters {
				byCID[c.CID] = c
				order = append(order, c.CID)
			}
			for i := 1; i < len(order); i++ {
				if order[i-1] >= order[i] {
					t.Errorf("clusters not sorted by cid: %v", order)
				}
			}
			for cid, w := range tc.clusters {
				c, ok := byCID[cid]
				if !ok {
					t.Errorf("%s missing from status (have %v)", cid, order)
					continue
				}
				if c.State != w.state || c.PeerUp != w.peerUp || c.Server.NodeID != w.node {
					t.Errorf("%s: state %q peerUp %v node %q; want %q %v %q", cid, c.State, c.PeerUp, c.Server.NodeID, w.state, w.peerUp, w.node)
				}
				if (w.err == "") != (c.Error == "") || !strings.Contains(c.Error, w.err) {
					t.Errorf("%s: error %q, want %q", cid, c.Error, w.err)
				}
				if c.Wanted != contains(in.Prefs.Wanted, cid) {
					t.Errorf("%s: wanted %v", cid, c.Wanted)
				}
			}
			plan := Want(&in)
			var keys []wgtypes.Key
			for _, p := range plan.Tunnel.Peers {
				keys = append(keys, p.PublicKey)
			}
			if !reflect.DeepEqual(keys, tc.peers) {
				t.Errorf("Want peers %v, want %v", keys, tc.peers)
			}
			if len(plan.Tunnel.Routes) != len(tc.peers) {
				t.Errorf("routes %v for %d peers", plan.Tunnel.Routes, len(tc.peers))
			}
			if len(tc.peers) > 0 && !reflect.DeepEqual(plan.Tunnel.Addresses, []netip.Prefix{netip.MustParsePrefix("100.96.0.2/32")}) {
				t.Errorf("addresses %v", plan.Tunnel.Addresses)
			}
			if len(plan.DNS) != tc.dns {
				t.Errorf("DNS routes %v, want %d", plan.DNS, tc.dns)
			}
			var msgs []string
			for _, w := range st.Warnings {
				if w.Code == "" || w.Message == "" {
					t.Errorf("warning without a code or a message: %+v", w)
				}
				msgs = append(msgs, w.Message)
			}
			w := strings.Join(msgs, "; ")
			if (tc.warn == "") != (w == "") || !strings.Contains(w, tc.warn) {
				t.Errorf("warnings %q, want %q", w, tc.warn)
			}
			if _, err := json.Marshal(st); err != nil {
				t.Error(err)
			}
		})
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func TestDeriveDetails(t *testing.T) {
	in := base()
	in.Prefs = signedInPrefs("ky3")
	in.Map = dmap(ky3n1)
	in.Device = device(peer(key1, t0.Add(-5*time.Second)))
	in.DNS = dnsplit.Status{Mode: "resolv.conf", Reason: "no systemd-resolved"}
	st := Derive(&in)
	c := st.Clusters[1] // abc, ky3, xym
	if c.CID != "ky3" || c.Name != "tc3-ky3" {
		t.Fatalf("first cluster %+v", c)
	}
	wantServer := localapi.Server{NodeID: "n1", Endpoint: "10.77.0.21:32768", PublicKey: key1.String(), Address: "100.100.1.1"}
	if c.Server != wantServer || c.Subnet != "100.100.1.0/24" || !c.LastHandshake.Equal(t0.Add(-5*time.Second)) {
		t.Errorf("cluster %+v", c)
	}
	if c.DNS.Server != "100.100.1.1" || !reflect.DeepEqual(c.DNS.Domains, []string{"ky3.rjwrn.example.com"}) {
		t.Errorf("dns %+v", c.DNS)
	}
	if st.Tunnel.Interface != "wg1" || !st.Tunnel.Up || !reflect.DeepEqual(st.Tunnel.Addresses, []string{"100.96.0.2/32"}) || st.Tunnel.PublicKey == "" {
		t.Errorf("tunnel %+v", st.Tunnel)
	}
	if st.DNS.Mode != "resolv.conf" || st.Session.User != "alice@example.com" || st.Session.DeviceID != "d1" {
		t.Errorf("status %+v", st)
	}
	if st.Version != "v1" {
		t.Errorf("version %q", st.Version)
	}

	// DNS off when no configurator; signed-out shows no user.
	in = base()
	st = Derive(&in)
	if st.DNS.Mode != "off" || st.Session.User != "" || st.Tunnel.Addresses == nil || st.Clusters == nil {
		t.Errorf("signed out: %+v", st)
	}

	// A bad device address keeps everything down and says why.
	in = base()
	in.Prefs = signedInPrefs("ky3")
	in.Map = dmap(ky3n1)
	in.Map.Device.Address = "banana"
	st = Derive(&in)
	if !strings.Contains(st.Tunnel.Error, "unusable tunnel address") || len(Want(&in).Tunnel.Peers) != 0 {
		t.Errorf("bad address: %+v", st.Tunnel)
	}

	// Derive is pure: same inputs, same status.
	in = base()
	in.Prefs = signedInPrefs("ky3", "xym")
	in.Map = dmap(ky3n1, xym)
	a, b := Derive(&in), Derive(&in)
	if !reflect.DeepEqual(a, b) {
		t.Error("Derive is not deterministic")
	}
}

func TestReadEveryAndNextChange(t *testing.T) {
	in := base()
	in.Prefs = signedInPrefs("ky3")
	if got := ReadEvery(&in); got != readIdle {
		t.Errorf("no map: read every %v, want %v", got, readIdle)
	}
	in.Map = dmap(ky3n1)
	if got := ReadEvery(&in); got != readPending {
		t.Errorf("peer not configured: %v", got)
	}
	in.Device = device(peer(key1, time.Time{}))
	if got := ReadEvery(&in); got != readPending {
		t.Errorf("no handshake: %v", got)
	}
	if got := NextChange(&in); !got.Equal(t0.Add(-time.Second + noHandshakeGrace)) {
		t.Errorf("NextChange = %v, want the end of the grace", got)
	}
	// Just (re)created: reads a sixteenth of the time since, from 1 ms.
	p := peer(key1, time.Time{})
	p.HandshakeAsked = t0.Add(-32 * time.Millisecond)
	in.Device = device(p)
	if got := ReadEvery(&in); got != 2*time.Millisecond {
		t.Errorf("32 ms after asking for a handshake: %v, want 2 ms", got)
	}
	p.HandshakeAsked = t0.Add(-8 * time.Millisecond)
	in.Device = device(p)
	if got := ReadEvery(&in); got != readFastest {
		t.Errorf("8 ms after asking for a handshake: %v, want %v", got, readFastest)
	}
	p.HandshakeAsked = t0
	in.Device = device(p)
	if got := ReadEvery(&in); got != readFastest {
		t.Errorf("at the asking: %v", got)
	}
	in.Device = device(peer(key1, t0.Add(-10*time.Second)))
	if got := ReadEvery(&in); got != readUp {
		t.Errorf("up: %v, want %v", got, readUp)
	}
	if got := NextChange(&in); !got.Equal(t0.Add(170 * time.Second)) {
		t.Errorf("NextChange = %v, want when the handshake goes stale", got)
	}
	in.Device = device(peer(key1, t0.Add(-200*time.Second)))
	if got := ReadEvery(&in); got != readPending {
		t.Errorf("stale handshake: %v", got)
	}
	if got := NextChange(&in); !got.Equal(in.Prefs.ExpiresAt.Add(-expiryWarning)) {
		t.Errorf("NextChange = %v, want the last-hour warning", got)
	}
	in.Prefs.ExpiresAt = t0.Add(30 * time.Minute)
	if got := NextChange(&in); !got.Equal(t0.Add(30 * time.Minute)) {
		t.Errorf("NextChange = %v, want the expiry", got)
	}
	in.Now = t0.Add(31 * time.Minute)
	if !NextChange(&in).IsZero() || ReadEvery(&in) != readIdle {
		t.Error("expired session still has pending changes or fast reads")
	}
}

// TestPeerUpTellsTheTruth: peerUp needs a fresh handshake and no silence
// while sending; the error says from whom and for how long; any byte back
// or the next handshake makes it up again.
func TestPeerUpTellsTheTruth(t *testing.T) {
	in := base()
	in.Prefs = signedInPrefs("ky3")
	in.Map = dmap(ky3n1)
	hs := t0.Add(-60 * time.Second)
	p := peer(key1, hs)
	p.LastReceive = t0.Add(-4 * time.Second)
	in.Device = device(p)
	if c := clusterOf(Derive(&in), "ky3"); !c.PeerUp || c.Error != "" {
		t.Fatalf("answering: %+v", c)
	}
	// Sending (a probe went out 3 s after the last answer), nothing back.
	p.SentSince = p.LastReceive.Add(3 * time.Second)
	for _, tc := range []struct {
		at   time.Duration // after the last answer
		up   bool
		text string
	}{
		{10 * time.Second, true, ""},
		{14 * time.Second, true, ""},
		{15 * time.Second, false, "no answer from n1 at 10.77.0.21:32768 for 15 s"},
		{17*time.Second + 900*time.Millisecond, false, "no answer from n1 at 10.77.0.21:32768 for 17 s"},
	} {
		in.Now = p.LastReceive.Add(tc.at)
		in.Device = device(p)
		c := clusterOf(Derive(&in), "ky3")
		if c.PeerUp != tc.up || c.Error != tc.text || c.State != localapi.ClusterConnected {
			t.Errorf("%v after the last answer: peerUp=%v error=%q state %s; want %v %q", tc.at, c.PeerUp, c.Error, c.State, tc.up, tc.text)
		}
		if !tc.up && ReadEvery(&in) != readPending {
			t.Errorf("silent peer read every %v", ReadEvery(&in))
		}
	}
	// NextChange wakes the daemon when the silence becomes evidence.
	in.Now = p.LastReceive.Add(6 * time.Second)
	if got := NextChange(&in); !got.Equal(p.LastReceive.Add(silentFor)) {
		t.Errorf("NextChange = %v, want %v", got, p.LastReceive.Add(silentFor))
	}
	// Silence with nothing sent is an idle tunnel, not a dead one.
	q := p
	q.SentSince = time.Time{}
	in.Now = p.LastReceive.Add(40 * time.Second)
	in.Device = device(q)
	if c := clusterOf(Derive(&in), "ky3"); !c.PeerUp {
		t.Errorf("idle: %+v", c)
	}
	// A send just now after a long silence is not yet evidence.
	q.SentSince = in.Now.Add(-2 * time.Second)
	in.Device = device(q)
	if c := clusterOf(Derive(&in), "ky3"); !c.PeerUp {
		t.Errorf("a send 2 s old: %+v", c)
	}
	// The next handshake (or a byte back) makes it up again.
	r := p
	r.LastHandshake = in.Now.Add(-time.Second)
	in.Device = device(r)
	if c := clusterOf(Derive(&in), "ky3"); !c.PeerUp || c.Error != "" {
		t.Errorf("after a new handshake: %+v", c)
	}
	// Past 180 s without a handshake the stale-handshake words stand.
	s := p
	in.Now = hs.Add(200 * time.Second)
	in.Device = device(s)
	if c := clusterOf(Derive(&in), "ky3"); c.PeerUp || !strings.Contains(c.Error, "no handshake with the VPN server") {
		t.Errorf("stale: %+v", c)
	}
}

// TestWantCarriesProbeAndEpoch: each peer is probed at its cluster's DNS
// server, and carries the server's start so a restart re-handshakes.
func TestWantCarriesProbeAndEpoch(t *testing.T) {
	in := base()
	in.Prefs = signedInPrefs("ky3")
	c := ky3n1
	c.VPN.ServerStartedAt = t0.Add(-time.Hour)
	in.Map = dmap(c)
	ps := Want(&in).Tunnel.Peers
	if len(ps) != 1 || ps[0].Probe != netip.MustParseAddrPort("100.100.1.1:53") || !ps[0].Epoch.Equal(t0.Add(-time.Hour)) {
		t.Fatalf("peers %+v", ps)
	}
}

func TestCheckDomain(t *testing.T) {
	for _, ok := range []string{"ky3.rjwrn.example.com", "k8s.ky3.rjwrn.example.com", "a", "x_y.example", strings.Repeat("a", 63) + ".b"} {
		if checkDomain(ok) != nil {
			t.Errorf("%q refused", ok)
		}
	}
	for _, bad := range []string{"", ".", "a..b", ".a", "a.", "a b", "a\nb", "*.ky3", strings.Repeat("a", 64), strings.Repeat("a.", 130)} {
		if checkDomain(bad) == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestWarningCodes: each warning carries the code clients decide by.
func TestWarningCodes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		in    func(*Inputs)
		codes []string
	}{
		{"signed out", func(in *Inputs) {}, nil},
		{"signed in, hours left", func(in *Inputs) { in.Prefs = signedInPrefs("ky3") }, nil},
		{"the last hour", func(in *Inputs) {
			in.Prefs = signedInPrefs("ky3")
			in.Prefs.ExpiresAt = t0.Add(time.Hour)
		}, []string{localapi.WarnSessionExpiring}},
		{"expired", func(in *Inputs) {
			in.Prefs = signedInPrefs("ky3")
			in.Prefs.ExpiresAt = t0
		}, []string{localapi.WarnSessionExpired}},
		{"dns failing in the last hour", func(in *Inputs) {
			in.Prefs = signedInPrefs("ky3")
			in.Prefs.ExpiresAt = t0.Add(10 * time.Minute)
			in.DNS = dnsplit.Status{Mode: "resolv.conf", Error: "resolv.conf: read-only file system"}
		}, []string{localapi.WarnSessionExpiring, localapi.WarnDNS}},
		{"prefs not saved", func(in *Inputs) {
			in.Prefs = signedInPrefs("ky3")
			in.SaveErr = "save the session and wanted clusters: no space left on device"
		}, []string{localapi.WarnNotSaved}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := base()
			tc.in(&in)
			st := Derive(&in)
			var codes []string
			for _, w := range st.Warnings {
				codes = append(codes, w.Code)
			}
			if !reflect.DeepEqual(codes, tc.codes) {
				t.Errorf("codes %q, want %q (%+v)", codes, tc.codes, st.Warnings)
			}
			if slices.Contains(codes, localapi.WarnDNS) && !slices.ContainsFunc(st.Warnings, func(w localapi.Warning) bool {
				return w.Code == localapi.WarnDNS && strings.Contains(w.Message, st.DNS.Error)
			}) {
				t.Errorf("the dns warning does not carry the DNS error %q: %+v", st.DNS.Error, st.Warnings)
			}
		})
	}
}

// TestNetworkMTUIsThePathsWhereKnown: status shows the MTU the tunnel's
// clamp fits (the routes to the VPN servers); only where the engine could
// not look one up does it show the smallest MTU of the uplinks.
func TestNetworkMTUIsThePathsWhereKnown(t *testing.T) {
	in := &Inputs{Network: netmon.State{Addrs: []netmon.Addr{
		{Iface: "lan0", Addr: netip.MustParsePrefix("10.77.0.101/24"), MTU: 1500},
		{Iface: "tailscale0", Addr: netip.MustParsePrefix("100.64.7.7/32"), MTU: 1280},
	}}}
	if got := Derive(in).Network.MTU; got != 1280 {
		t.Errorf("no path known: MTU %d, want the uplinks' smallest 1280", got)
	}
	in.Device.PathMTU = 1500
	if got := Derive(in).Network.MTU; got != 1500 {
		t.Errorf("path known: MTU %d, want the path's 1500", got)
	}
}
