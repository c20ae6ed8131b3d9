package netmon

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
)

// RouteMTU is the MTU of the path the routing table gives to dst: the
// route's own MTU where it sets one (`ip route … mtu N`), else its
// interface's. The tunnel's datagrams to a VPN server leave this way, so
// this, not the smallest MTU of every interface, is what its TCP clamp
// must fit.
func RouteMTU(dst netip.Addr) (int, error) {
	return routeMTU(&netlink.Handle{}, dst) // a zero Handle: this process's namespace, as netlink's own functions
}

// routeMTU is RouteMTU through h (tests: another namespace's handle).
func routeMTU(h *netlink.Handle, dst netip.Addr) (int, error) {
	rs, err := h.RouteGet(net.IP(dst.Unmap().AsSlice()))
	if err != nil {
		return 0, fmt.Errorf("route to %s: %w", dst, err)
	}
	if len(rs) == 0 {
		return 0, fmt.Errorf("route to %s: none", dst)
	}
	r := rs[0]
	l, err := h.LinkByIndex(r.LinkIndex)
	if err != nil {
		return 0, fmt.Errorf("route to %s: interface %d: %w", dst, r.LinkIndex, err)
	}
	mtu := l.Attrs().MTU
	if r.MTU > 0 && (mtu == 0 || r.MTU < mtu) {
		mtu = r.MTU
	}
	return mtu, nil
}
