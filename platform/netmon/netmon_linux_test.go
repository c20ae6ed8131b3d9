package netmon

import (
	"net/netip"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/runos/vpn/internal/netnstest"
)

// TestLinuxMonitorInANamespace: the real netlink source in a namespace of
// its own sees a laptop move from one uplink to another (address and
// default route), and not the tunnel's address.
func TestLinuxMonitorInANamespace(t *testing.T) {
	netnstest.Require(t, "ip")
	laptop := netnstest.New(t, "nm")
	lanNS := netnstest.New(t, "nml")
	wanNS := netnstest.New(t, "nmw")
	netnstest.Link(t, laptop, "lan0", "10.77.0.101/24", lanNS, "lan0", "10.77.0.1/24")
	laptop.MustExec("ip", "route", "add", "default", "via", "10.77.0.1")
	h, err := netns.GetFromName(laptop.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	src, err := newLinuxSource(h)
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(Options{src: src, Ignore: func(i string) bool { return i == "wg1" }, Settle: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if st := m.State(); st.MTU() != 1500 || len(st.Default) != 1 || st.Default[0].Iface != "lan0" || len(st.Addrs) != 1 {
		t.Fatalf("first state: %v", st)
	}
	// A tunnel-like interface comes up with an address: not a change.
	laptop.MustExec("ip", "tuntap", "add", "wg1", "mode", "tun")
	laptop.MustExec("ip", "addr", "add", "100.96.0.2/32", "dev", "wg1")
	laptop.MustExec("ip", "link", "set", "wg1", "up")
	select {
	case c := <-m.Changes():
		t.Fatalf("the tunnel's address reported: %v", c)
	case <-time.After(300 * time.Millisecond):
	}
	// The laptop moves: the LAN goes, the WAN comes with a smaller MTU.
	start := time.Now()
	laptop.MustExec("ip", "link", "set", "lan0", "down")
	netnstest.Link(t, laptop, "wan0", "198.51.100.101/24", wanNS, "wan0", "198.51.100.1/24")
	laptop.MustExec("ip", "link", "set", "wan0", "mtu", "1280")
	laptop.MustExec("ip", "route", "add", "default", "via", "198.51.100.1")
	deadline := time.After(10 * time.Second)
	for {
		select {
		case c := <-m.Changes():
			if c.New.MTU() == 1280 && len(c.New.Default) == 1 && c.New.Default[0].Iface == "wan0" && len(c.New.Addrs) == 1 && c.New.Addrs[0].Iface == "wan0" {
				t.Logf("change seen %s after the first command: %v", time.Since(start).Round(time.Millisecond), c.New)
				return
			}
		case <-deadline:
			t.Fatalf("the move to wan0 not seen; state %v", m.State())
		}
	}
}

// TestRouteMTUFollowsTheRoute: the MTU of the path to an address is its
// route's interface's (or the route's own mtu), whatever smaller MTU
// another interface has: here another WireGuard-like tunnel at 1280.
func TestRouteMTUFollowsTheRoute(t *testing.T) {
	netnstest.Require(t, "ip")
	laptop := netnstest.New(t, "rm")
	lanNS := netnstest.New(t, "rml")
	netnstest.Link(t, laptop, "lan0", "10.77.0.101/24", lanNS, "lan0", "10.77.0.1/24")
	laptop.MustExec("ip", "route", "add", "default", "via", "10.77.0.1")
	laptop.MustExec("ip", "tuntap", "add", "wgx", "mode", "tun")
	laptop.MustExec("ip", "link", "set", "wgx", "mtu", "1280", "up")
	laptop.MustExec("ip", "addr", "add", "10.97.0.2/24", "dev", "wgx")
	nh, err := netns.GetFromName(laptop.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer nh.Close()
	h, err := netlink.NewHandleAt(nh)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	for _, tc := range []struct {
		dst  string
		want int
	}{
		{"10.77.0.21", 1500},   // the LAN
		{"198.51.100.7", 1500}, // the default route
		{"10.97.0.1", 1280},    // the other tunnel, for what it carries
	} {
		got, err := routeMTU(h, netip.MustParseAddr(tc.dst))
		if err != nil || got != tc.want {
			t.Errorf("route MTU to %s: %d, %v; want %d", tc.dst, got, err, tc.want)
		}
	}
	// A route's own mtu is the path's.
	laptop.MustExec("ip", "route", "add", "203.0.113.0/24", "via", "10.77.0.1", "mtu", "1400")
	if got, err := routeMTU(h, netip.MustParseAddr("203.0.113.9")); err != nil || got != 1400 {
		t.Errorf("route MTU with the route's mtu 1400: %d, %v", got, err)
	}
	// No route: an error, not a guess.
	laptop.MustExec("ip", "route", "del", "default")
	if got, err := routeMTU(h, netip.MustParseAddr("192.0.2.1")); err == nil {
		t.Errorf("no route to 192.0.2.1, yet MTU %d", got)
	}
}
