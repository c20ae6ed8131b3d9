package platform

import (
	"net/netip"
	"testing"
)

func TestParseNetstat(t *testing.T) {
	out := []byte(`Routing tables

Internet:
Destination        Gateway            Flags               Netif Expire
default            10.77.0.1          UGScg                 en0
10.77/16           link#6             UCS                   en0      !
100.64/10          100.101.1.1        UGSc            utun4
100.100.1/24       utun3              USc             utun3
127.0.0.1          127.0.0.1          UH                lo0

Internet6:
Destination                             Gateway                                 Flags               Netif Expire
default                                 fe80::%utun0                            UGcIg               utun0
fe80::%lo0/64                           fe80::1%lo0                             UcI                   lo0
`)
	want := []Route{
		{Prefix: netip.MustParsePrefix("0.0.0.0/0"), Interface: "en0"},
		{Prefix: netip.MustParsePrefix("10.77.0.0/16"), Interface: "en0"},
		{Prefix: netip.MustParsePrefix("100.64.0.0/10"), Interface: "utun4"},
		{Prefix: netip.MustParsePrefix("100.100.1.0/24"), Interface: "utun3"},
		{Prefix: netip.MustParsePrefix("127.0.0.1/32"), Interface: "lo0"},
		{Prefix: netip.MustParsePrefix("::/0"), Interface: "utun0"},
		{Prefix: netip.MustParsePrefix("fe80::/64"), Interface: "lo0"},
	}
	got := parseNetstat(out)
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("route %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if r, ok := LongestMatch(got, netip.MustParseAddr("100.100.1.1")); !ok || r.Interface != "utun3" {
		t.Errorf("longest match for 100.100.1.1: %+v", r)
	}
	if s := parseRouteGet([]byte("   route to: 100.100.1.1\n  interface: utun3\n")); s != "utun3" {
		t.Errorf("route get: %q", s)
	}
}
