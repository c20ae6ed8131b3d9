package wgserver

import (
	"fmt"
	"net/netip"
	"testing"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/runos/vpn/wghost"
)

func key(t *testing.T) wgtypes.Key {
	t.Helper()
	k, err := wgtypes.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k.PublicKey()
}

// TestPeersAreHostPeers: a device is a host peer allowed its address (and,
// for an IPv4 one, the IPv6 address derived from it), with no endpoint (its packets give it) and no keepalive; the diff of the
// same devices twice is empty, so a re-Apply disturbs no session.
func TestPeersAreHostPeers(t *testing.T) {
	k4, k6 := key(t), key(t)
	got := peers([]Peer{
		{DeviceID: "d1", PublicKey: k4, Address: netip.MustParseAddr("100.96.0.2")},
		{DeviceID: "d2", PublicKey: k6, Address: netip.MustParseAddr("fd00::2")},
	})
	want := []wghost.Peer{
		{PublicKey: k4, AllowedIPs: []netip.Prefix{netip.MustParsePrefix("100.96.0.2/32"), netip.MustParsePrefix("fd52:4f53:5600::6460:2/128")}},
		{PublicKey: k6, AllowedIPs: []netip.Prefix{netip.MustParsePrefix("fd00::2/128")}},
	}
	for i := range want {
		if got[i].PublicKey != want[i].PublicKey || got[i].Endpoint.IsValid() || got[i].Keepalive != 0 ||
			fmt.Sprint(got[i].AllowedIPs) != fmt.Sprint(want[i].AllowedIPs) {
			t.Errorf("peer %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if n := len(wghost.Diff(got, got)); n != 0 {
		t.Errorf("the same devices twice gave %d changes", n)
	}
}
