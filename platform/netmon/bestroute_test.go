package netmon

import (
	"net/netip"
	"testing"
)

func TestBestRoute(t *testing.T) {
	p := netip.MustParsePrefix
	rows := []routeRow{
		{Prefix: p("0.0.0.0/0"), Metric: 35, Iface: 1},    // Wi-Fi
		{Prefix: p("0.0.0.0/0"), Metric: 25, Iface: 2},    // Ethernet, preferred
		{Prefix: p("10.0.0.0/8"), Metric: 5, Iface: 3},    // another VPN's split route
		{Prefix: p("10.77.0.0/16"), Metric: 50, Iface: 4}, // the LAN: longer wins over a lower metric
		{Prefix: p("::/0"), Metric: 1, Iface: 5},
		{Prefix: p("2001:db8::/32"), Metric: 9, Iface: 6},
	}
	for _, tc := range []struct {
		dst   string
		iface int
		ok    bool
	}{
		{"203.0.113.9", 2, true},
		{"10.1.2.3", 3, true},
		{"10.77.0.21", 4, true},
		{"::ffff:10.77.0.21", 4, true}, // a v4-mapped endpoint is the v4 one
		{"2001:db8::1", 6, true},
		{"2001:db9::1", 5, true},
	} {
		r, ok := bestRoute(rows, netip.MustParseAddr(tc.dst))
		if ok != tc.ok || r.Iface != tc.iface {
			t.Errorf("bestRoute(%s) = iface %d, %v; want %d, %v", tc.dst, r.Iface, ok, tc.iface, tc.ok)
		}
	}
	if r, ok := bestRoute(rows[:4], netip.MustParseAddr("2001:db8::1")); ok {
		t.Errorf("an IPv6 destination with only IPv4 routes: got %+v, want none", r)
	}
	if r, ok := bestRoute(nil, netip.MustParseAddr("10.1.2.3")); ok {
		t.Errorf("no routes: got %+v, want none", r)
	}
}
