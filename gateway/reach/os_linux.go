package reach

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// LinuxOS is the node's kernel: nftables and policy routing through
// netlink (the ruleset replaced in one transaction), and transparent
// sockets.
type LinuxOS struct{}

// Listen opens a transparent listener on a free port of every address.
func (LinuxOS) Listen(network string) (net.Listener, error) {
	lc := net.ListenConfig{Control: func(network, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			if network == "tcp6" {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_IPV6, unix.IPV6_TRANSPARENT, 1)
				if serr == nil {
					serr = unix.SetsockoptInt(int(fd), unix.SOL_IPV6, unix.IPV6_V6ONLY, 1)
				}
				return
			}
			serr = unix.SetsockoptInt(int(fd), unix.SOL_IP, unix.IP_TRANSPARENT, 1)
		})
		if err != nil {
			return err
		}
		return serr
	}}
	addr := "0.0.0.0:0"
	if network == "tcp6" {
		addr = "[::]:0"
	}
	ln, err := lc.Listen(context.Background(), network, addr)
	if err != nil {
		return nil, fmt.Errorf("forwarding into the cluster: transparent listener (%s): %w", network, err)
	}
	return ln, nil
}

// Install programs the ruleset, routes marked packets to the local stack
// and the devices' IPv6 addresses through iface (the server routes only
// their IPv4 pool there).
func (LinuxOS) Install(rs Ruleset, iface string) error {
	if err := program(rs); err != nil {
		return fmt.Errorf("forwarding into the cluster: nftables table %s: %w", Table, err)
	}
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		r := netlink.NewRule()
		r.Family, r.Mark, r.Table, r.Priority = fam, Mark, RouteTable, 100
		if err := netlink.RuleAdd(r); err != nil && err != syscall.EEXIST {
			return fmt.Errorf("forwarding into the cluster: rule fwmark 0x%x: %w", Mark, err)
		}
		dst := &net.IPNet{IP: net.IPv4zero, Mask: net.CIDRMask(0, 32)}
		if fam == netlink.FAMILY_V6 {
			dst = &net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}
		}
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		rt := &netlink.Route{Dst: dst, Type: unix.RTN_LOCAL, Table: RouteTable, LinkIndex: lo.Attrs().Index, Scope: netlink.SCOPE_HOST}
		if err := netlink.RouteReplace(rt); err != nil {
			return fmt.Errorf("forwarding into the cluster: local route in table %d: %w", RouteTable, err)
		}
	}
	l, err := netlink.LinkByName(iface)
	if err != nil {
		return fmt.Errorf("forwarding into the cluster: interface %s: %w", iface, err)
	}
	d6 := deviceRange6()
	rt := &netlink.Route{LinkIndex: l.Attrs().Index, Dst: &net.IPNet{IP: d6.Addr().AsSlice(), Mask: net.CIDRMask(d6.Bits(), 128)}, Scope: netlink.SCOPE_LINK}
	if err := netlink.RouteReplace(rt); err != nil {
		return fmt.Errorf("forwarding into the cluster: route %s via %s: %w", d6, iface, err)
	}
	return nil
}

// Remove deletes the table, the rules and the routes (what is gone
// already is no error).
func (LinuxOS) Remove() error {
	var first error
	if err := unprogram(); err != nil {
		first = fmt.Errorf("forwarding into the cluster: delete nftables table %s: %w", Table, err)
	}
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		r := netlink.NewRule()
		r.Family, r.Mark, r.Table, r.Priority = fam, Mark, RouteTable, 100
		_ = netlink.RuleDel(r)
		routes, _ := netlink.RouteListFiltered(fam, &netlink.Route{Table: RouteTable}, netlink.RT_FILTER_TABLE)
		for _, rt := range routes {
			_ = netlink.RouteDel(&rt)
		}
	}
	d6 := deviceRange6()
	_ = netlink.RouteDel(&netlink.Route{Dst: &net.IPNet{IP: d6.Addr().AsSlice(), Mask: net.CIDRMask(d6.Bits(), 128)}})
	return first
}

// Counters reads the named counters of the table.
func (LinuxOS) Counters() (map[string]uint64, error) {
	c, err := counters()
	if err != nil {
		return nil, fmt.Errorf("drop counters of nftables table %s: %w", Table, err)
	}
	return c, nil
}

// Forwarding reports whether the node forwards IPv4 (net.ipv4.ip_forward,
// of the calling thread's network namespace).
func (LinuxOS) Forwarding() (bool, error) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	if err != nil {
		return false, err
	}
	return strings.TrimSpace(string(b)) == "1", nil
}
