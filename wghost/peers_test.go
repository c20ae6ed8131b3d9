package wghost

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

func pubKey(t *testing.T) wgtypes.Key {
	t.Helper()
	k, err := wgtypes.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k.PublicKey()
}

func prefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// changes indexes Diff's answer by key, failing on two changes to one peer.
func changes(t *testing.T, have, want []Peer) map[wgtypes.Key]wgtypes.PeerConfig {
	t.Helper()
	got := map[wgtypes.Key]wgtypes.PeerConfig{}
	for _, c := range Diff(have, want) {
		if _, dup := got[c.PublicKey]; dup {
			t.Fatalf("two changes for one peer: %+v", c)
		}
		got[c.PublicKey] = c
	}
	return got
}

// TestDiffNodePeers: a node's peers (one address each, no endpoint): an
// unchanged peer is not touched, a gone one removed, a new one added, a
// changed address replaced whatever it was (even a wider range).
func TestDiffNodePeers(t *testing.T) {
	same, moved, gone, fresh, wide := pubKey(t), pubKey(t), pubKey(t), pubKey(t), pubKey(t)
	roamed := netip.MustParseAddrPort("203.0.113.7:51820") // learnt from the device's packets
	have := []Peer{
		{PublicKey: same, Endpoint: roamed, AllowedIPs: prefixes("100.96.0.2/32")},
		{PublicKey: moved, AllowedIPs: prefixes("100.96.0.3/32")},
		{PublicKey: gone, AllowedIPs: prefixes("100.96.0.4/32")},
		{PublicKey: wide, AllowedIPs: prefixes("100.96.0.0/16")},
	}
	want := []Peer{
		{PublicKey: same, AllowedIPs: prefixes("100.96.0.2/32")},
		{PublicKey: moved, AllowedIPs: prefixes("100.96.0.9/32")},
		{PublicKey: fresh, AllowedIPs: prefixes("100.96.0.5/32")},
		{PublicKey: wide, AllowedIPs: prefixes("100.96.0.6/32")},
	}
	got := changes(t, have, want)
	if _, ok := got[same]; ok {
		t.Error("an unchanged peer was touched (its session would be disturbed; its roamed endpoint is not a change)")
	}
	if c, ok := got[gone]; !ok || !c.Remove {
		t.Errorf("removed peer: %+v", c)
	}
	for k, addr := range map[wgtypes.Key]string{moved: "100.96.0.9/32", fresh: "100.96.0.5/32", wide: "100.96.0.6/32"} {
		c, ok := got[k]
		if !ok || c.Remove || !c.ReplaceAllowedIPs || len(c.AllowedIPs) != 1 || c.AllowedIPs[0].String() != addr || c.Endpoint != nil {
			t.Errorf("peer %s: %+v, want allowed IP %s only and no endpoint", addr, c, addr)
		}
	}
	if c := got[fresh]; c.UpdateOnly {
		t.Error("a new peer was sent as an update (wireguard-go would not add it)")
	}
	if c := got[moved]; !c.UpdateOnly {
		t.Error("a changed peer was sent as an add (a peer removed meanwhile would come back)")
	}
	if len(Diff(nil, nil)) != 0 || len(Diff(want, want)) != 0 {
		t.Error("identical sets gave changes")
	}
}

// TestDiffLaptopPeers: a laptop's peers (a cluster's server each, with an
// endpoint and keepalive): a moved server's endpoint is set, a new subnet
// replaces the allowed IPs, the order and masking of prefixes is no change.
func TestDiffLaptopPeers(t *testing.T) {
	ky3, xym, old := pubKey(t), pubKey(t), pubKey(t)
	ep1 := netip.MustParseAddrPort("10.77.0.21:32768")
	ep2 := netip.MustParseAddrPort("198.51.100.22:32768")
	have := []Peer{
		{PublicKey: ky3, Endpoint: ep1, AllowedIPs: prefixes("100.100.1.0/24", "10.43.0.0/16"), Keepalive: 25 * time.Second},
		{PublicKey: xym, Endpoint: ep1, AllowedIPs: prefixes("100.100.2.0/24"), Keepalive: 25 * time.Second},
		{PublicKey: old, Endpoint: ep1, AllowedIPs: prefixes("100.100.3.0/24"), Keepalive: 25 * time.Second},
	}
	want := []Peer{
		{PublicKey: ky3, Endpoint: ep1, AllowedIPs: prefixes("10.43.0.1/16", "100.100.1.0/24"), Keepalive: 25 * time.Second},
		{PublicKey: xym, Endpoint: ep2, AllowedIPs: prefixes("100.100.2.0/24"), Keepalive: 25 * time.Second},
	}
	got := changes(t, have, want)
	if c, ok := got[ky3]; ok {
		t.Errorf("reordered, unmasked prefixes made a change: %+v", c)
	}
	c, ok := got[xym]
	if !ok || !c.UpdateOnly || c.Endpoint == nil || c.Endpoint.AddrPort() != ep2 || c.PersistentKeepaliveInterval == nil || *c.PersistentKeepaliveInterval != 25*time.Second {
		t.Errorf("moved server: %+v", c)
	}
	if c := got[old]; !c.Remove {
		t.Errorf("old server: %+v", c)
	}
	diff := Diff(have, want)
	if !diff[0].Remove {
		t.Errorf("removals come first (a moved server's old key goes before its allowed IPs come back): %+v", diff)
	}
	ka := want[1]
	ka.Keepalive = 0
	if c, ok := changes(t, want, []Peer{want[0], ka})[xym]; !ok || *c.PersistentKeepaliveInterval != 0 {
		t.Errorf("keepalive turned off: %+v", c)
	}
}

// TestPeerOfDevice: the device's peers, as wgctrl reads them (IPv4 in
// 16 bytes among them), compare equal to the peers that made them.
func TestPeerOfDevice(t *testing.T) {
	k := pubKey(t)
	want := Peer{PublicKey: k, Endpoint: netip.MustParseAddrPort("10.77.0.21:32768"),
		AllowedIPs: prefixes("100.100.1.0/24", "fd00::/64"), Keepalive: 25 * time.Second}
	dev := &wgtypes.Device{Peers: []wgtypes.Peer{{
		PublicKey: k, Endpoint: &net.UDPAddr{IP: net.ParseIP("10.77.0.21"), Port: 32768}, PersistentKeepaliveInterval: 25 * time.Second,
		AllowedIPs: []net.IPNet{
			{IP: net.ParseIP("100.100.1.0"), Mask: net.CIDRMask(120, 128)},
			{IP: net.ParseIP("fd00::"), Mask: net.CIDRMask(64, 128)},
		},
	}}}
	if d := Diff(PeersOf(dev), []Peer{want}); len(d) != 0 {
		t.Errorf("the device's own peer differs from the one that made it: %+v (read %+v)", d, PeersOf(dev))
	}
	if got := HostPrefix(netip.MustParseAddr("::ffff:100.96.0.2")); got.String() != "100.96.0.2/32" {
		t.Errorf("HostPrefix = %s", got)
	}
}

// TestRecreate: the peer goes and comes back in one transaction.
func TestRecreate(t *testing.T) {
	p := Peer{PublicKey: pubKey(t), AllowedIPs: prefixes("100.100.1.0/24")}
	pcs := Recreate(p)
	if len(pcs) != 2 || !pcs[0].Remove || pcs[1].Remove || pcs[1].UpdateOnly || pcs[0].PublicKey != p.PublicKey || pcs[1].PublicKey != p.PublicKey {
		t.Errorf("Recreate = %+v", pcs)
	}
}
