package wgserver

import (
	"net"
	"net/netip"
	"testing"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

func key(t *testing.T) wgtypes.Key {
	t.Helper()
	k, err := wgtypes.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k.PublicKey()
}

func devPeer(k wgtypes.Key, addr string) wgtypes.Peer {
	return wgtypes.Peer{PublicKey: k, AllowedIPs: allowedIPs(netip.MustParseAddr(addr))}
}

func TestPeerChanges(t *testing.T) {
	same, moved, gone, fresh, wide := key(t), key(t), key(t), key(t), key(t)
	have := []wgtypes.Peer{
		devPeer(same, "100.96.0.2"),
		devPeer(moved, "100.96.0.3"),
		devPeer(gone, "100.96.0.4"),
		{PublicKey: wide, AllowedIPs: []net.IPNet{{IP: net.IPv4(100, 96, 0, 0).To4(), Mask: net.CIDRMask(16, 32)}}},
	}
	want := []Peer{
		{PublicKey: same, Address: netip.MustParseAddr("100.96.0.2")},
		{PublicKey: moved, Address: netip.MustParseAddr("100.96.0.9")},
		{PublicKey: fresh, Address: netip.MustParseAddr("100.96.0.5")},
		{PublicKey: wide, Address: netip.MustParseAddr("100.96.0.6")},
	}
	got := map[wgtypes.Key]wgtypes.PeerConfig{}
	for _, c := range peerChanges(have, want) {
		if _, dup := got[c.PublicKey]; dup {
			t.Fatalf("two changes for one peer")
		}
		got[c.PublicKey] = c
	}
	if _, ok := got[same]; ok {
		t.Error("an unchanged peer was touched (its session would be disturbed)")
	}
	if c, ok := got[gone]; !ok || !c.Remove {
		t.Errorf("removed peer: %+v", c)
	}
	for k, addr := range map[wgtypes.Key]string{moved: "100.96.0.9/32 fd52:4f53:5600::6460:9/128", fresh: "100.96.0.5/32 fd52:4f53:5600::6460:5/128", wide: "100.96.0.6/32 fd52:4f53:5600::6460:6/128"} {
		c, ok := got[k]
		if !ok || c.Remove || !c.ReplaceAllowedIPs || len(c.AllowedIPs) != 2 || c.AllowedIPs[0].String()+" "+c.AllowedIPs[1].String() != addr {
			t.Errorf("peer %s: %+v, want allowed IPs %s only", addr, c, addr)
		}
	}
	if len(peerChanges(nil, nil)) != 0 {
		t.Error("no peers, yet changes")
	}
	if n := len(peerChanges([]wgtypes.Peer{devPeer(same, "100.96.0.2")}, []Peer{{PublicKey: same, Address: netip.MustParseAddr("100.96.0.2")}})); n != 0 {
		t.Errorf("identical sets gave %d changes", n)
	}
}
