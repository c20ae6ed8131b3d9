package platform

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// RouteTo is the interface the kernel would send a packet to dst through:
// its own lookup (RTM_GETROUTE), policy rules included, so another VPN's
// rule-selected table (Tailscale's table 52) shows as what it is.
func RouteTo(dst netip.Addr) (string, error) {
	rs, err := netlink.RouteGet(dst.AsSlice())
	if err != nil {
		return "", fmt.Errorf("route to %s: %w", dst, err)
	}
	if len(rs) == 0 {
		return "", fmt.Errorf("route to %s: none", dst)
	}
	l, err := netlink.LinkByIndex(rs[0].LinkIndex)
	if err != nil {
		return "", fmt.Errorf("route to %s: interface %d: %w", dst, rs[0].LinkIndex, err)
	}
	return l.Attrs().Name, nil
}

// Routes lists the unicast routes of every table (IPv4 and IPv6).
func Routes() ([]Route, error) {
	var out []Route
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		rs, err := retryDump(func() ([]netlink.Route, error) {
			return netlink.RouteListFiltered(fam, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
		})
		if err != nil {
			return nil, fmt.Errorf("list routes: %w", err)
		}
		for _, r := range rs {
			if r.Type != unix.RTN_UNICAST {
				continue
			}
			p, ok := routePrefix(r.Dst, fam)
			if !ok {
				continue
			}
			name := ""
			if l, err := netlink.LinkByIndex(r.LinkIndex); err == nil {
				name = l.Attrs().Name
			}
			out = append(out, Route{Prefix: p, Interface: name, Table: r.Table, Metric: r.Priority})
		}
	}
	return out, nil
}

// routePrefix is a route's destination; nil is the default route.
func routePrefix(dst *net.IPNet, fam int) (netip.Prefix, bool) {
	if dst == nil {
		if fam == netlink.FAMILY_V6 {
			return netip.MustParsePrefix("::/0"), true
		}
		return netip.MustParsePrefix("0.0.0.0/0"), true
	}
	return prefixOf(dst)
}
