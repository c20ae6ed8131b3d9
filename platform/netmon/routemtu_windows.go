package netmon

import (
	"fmt"
	"net/netip"

	"golang.org/x/sys/windows"
	"golang.zx2c4.com/wireguard/windows/tunnel/winipcfg"
)

// RouteMTU is the MTU of the path the routing table gives to dst: the
// forwarding table's best route for it (bestRoute: the longest prefix,
// then the route's and its interface's metric summed, as Windows picks)
// and that interface's IP MTU. The tunnel's datagrams to a VPN server
// leave this way, so its TCP clamp fits this and not another VPN's
// interface. Built and vetted here; run only on Windows (no Windows
// machine in this lab).
func RouteMTU(dst netip.Addr) (int, error) {
	dst = dst.Unmap()
	if !dst.IsValid() {
		return 0, fmt.Errorf("route to %s: not an address", dst)
	}
	family := winipcfg.AddressFamily(windows.AF_INET6)
	if dst.Is4() {
		family = windows.AF_INET
	}
	rows, err := winipcfg.GetIPForwardTable2(family)
	if err != nil {
		return 0, fmt.Errorf("route to %s: forwarding table: %w", dst, err)
	}
	ifaces := map[uint32]*winipcfg.MibIPInterfaceRow{}
	var table []routeRow
	for i := range rows {
		r := &rows[i]
		ifc, seen := ifaces[r.InterfaceIndex]
		if !seen {
			ifc, _ = r.InterfaceLUID.IPInterface(family) // nil: the interface went away since the table was read
			ifaces[r.InterfaceIndex] = ifc
		}
		if ifc == nil || !ifc.Connected {
			continue // a disconnected interface's routes carry nothing
		}
		table = append(table, routeRow{Prefix: r.DestinationPrefix.Prefix(), Metric: r.Metric + ifc.Metric, Iface: int(r.InterfaceIndex)})
	}
	best, ok := bestRoute(table, dst)
	if !ok {
		return 0, fmt.Errorf("route to %s: none", dst)
	}
	if mtu := ifaces[uint32(best.Iface)].NLMTU; mtu > 0 {
		return int(mtu), nil
	}
	return 0, fmt.Errorf("route to %s: interface %d has no MTU", dst, best.Iface)
}
