package platform

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// routeProto marks the routes the daemon adds ("static" in ip-route(8)), so
// that SetRoutes removes only its own and leaves a route an administrator
// added by hand.
const routeProto = netlink.RouteProtocol(unix.RTPROT_STATIC)

type linuxTunnelNet struct{ name string }

// OpenTunnelNet returns the TunnelNet of the interface named name, which must exist.
func OpenTunnelNet(name string) (TunnelNet, error) {
	if _, err := netlink.LinkByName(name); err != nil {
		return nil, fmt.Errorf("interface %s: %w", name, err)
	}
	return &linuxTunnelNet{name: name}, nil
}

// DeleteInterface removes a left-over tunnel interface; a missing one is
// not an error. Only a TUN device is removed: an interface of that name of
// any other kind (a kernel WireGuard wg1 of wg-quick) belongs to someone
// else, and that is an error.
func DeleteInterface(name string) error {
	l, err := netlink.LinkByName(name)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return nil
		}
		return fmt.Errorf("interface %s: %w", name, err)
	}
	if _, ok := l.(*netlink.Tuntap); !ok {
		return fmt.Errorf("interface %s exists and is a %s device, not a tunnel this daemon made: remove it or choose another name with --interface", name, l.Type())
	}
	if err := netlink.LinkDel(l); err != nil {
		return fmt.Errorf("delete interface %s: %w", name, err)
	}
	return nil
}

// InterfaceExists reports whether an interface named name exists.
func InterfaceExists(name string) bool {
	_, err := netlink.LinkByName(name)
	return err == nil
}

func (n *linuxTunnelNet) link() (netlink.Link, error) {
	l, err := netlink.LinkByName(n.name)
	if err != nil {
		return nil, fmt.Errorf("interface %s: %w", n.name, err)
	}
	return l, nil
}

func (n *linuxTunnelNet) Up() error {
	l, err := n.link()
	if err != nil {
		return err
	}
	if err := netlink.LinkSetUp(l); err != nil {
		return fmt.Errorf("set %s up: %w", n.name, err)
	}
	return nil
}

func (n *linuxTunnelNet) SetAddresses(addrs []netip.Prefix) error {
	l, err := n.link()
	if err != nil {
		return err
	}
	have, err := retryDump(func() ([]netlink.Addr, error) { return netlink.AddrList(l, unix.AF_UNSPEC) })
	if err != nil {
		return fmt.Errorf("list addresses of %s: %w", n.name, err)
	}
	want := map[netip.Prefix]bool{}
	for _, a := range addrs {
		want[a] = true
	}
	for _, a := range have {
		p, ok := prefixOf(a.IPNet)
		if !ok || p.Addr().IsLinkLocalUnicast() {
			continue // the kernel's own fe80:: address
		}
		if want[p] {
			delete(want, p)
			continue
		}
		if err := netlink.AddrDel(l, &a); err != nil {
			return fmt.Errorf("remove address %s from %s: %w", p, n.name, err)
		}
	}
	for _, p := range addrs {
		if !want[p] {
			continue
		}
		if err := netlink.AddrReplace(l, &netlink.Addr{IPNet: ipNet(p)}); err != nil {
			return fmt.Errorf("add address %s to %s: %w", p, n.name, err)
		}
	}
	return nil
}

func (n *linuxTunnelNet) SetRoutes(routes []netip.Prefix) error {
	l, err := n.link()
	if err != nil {
		return err
	}
	filter := &netlink.Route{LinkIndex: l.Attrs().Index, Protocol: routeProto, Table: unix.RT_TABLE_MAIN}
	have, err := retryDump(func() ([]netlink.Route, error) {
		return netlink.RouteListFiltered(unix.AF_UNSPEC, filter,
			netlink.RT_FILTER_OIF|netlink.RT_FILTER_PROTOCOL|netlink.RT_FILTER_TABLE)
	})
	if err != nil {
		return fmt.Errorf("list routes of %s: %w", n.name, err)
	}
	want := map[netip.Prefix]bool{}
	for _, r := range routes {
		want[r.Masked()] = true
	}
	for _, r := range have {
		p, ok := prefixOf(r.Dst)
		if ok && want[p] {
			delete(want, p)
			continue
		}
		if err := netlink.RouteDel(&r); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("remove route %v via %s: %w", r.Dst, n.name, err)
		}
	}
	for _, p := range routes {
		p = p.Masked()
		if !want[p] {
			continue
		}
		r := &netlink.Route{
			LinkIndex: l.Attrs().Index,
			Dst:       ipNet(p),
			Scope:     netlink.SCOPE_LINK,
			Protocol:  routeProto,
			Table:     unix.RT_TABLE_MAIN,
		}
		if err := netlink.RouteReplace(r); err != nil {
			return fmt.Errorf("add route %s via %s: %w", p, n.name, err)
		}
	}
	return nil
}

// retryDump repeats a netlink dump the kernel interrupted because the table
// changed under it (other programs change routes too).
func retryDump[T any](f func() ([]T, error)) ([]T, error) {
	var err error
	for range 5 {
		var v []T
		if v, err = f(); !errors.Is(err, netlink.ErrDumpInterrupted) {
			return v, err
		}
	}
	return nil, err
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

func prefixOf(n *net.IPNet) (netip.Prefix, bool) {
	if n == nil {
		return netip.Prefix{}, false
	}
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(a.Unmap(), ones), true
}
