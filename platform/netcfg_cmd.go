package platform

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
)

// cmdNet is the TunnelNet of macOS and Windows: it changes the interface
// with the OS's own tools (ifconfig and route on macOS, netsh on Windows),
// whose command lines tunnelCmds builds. The logic here compiles and is
// tested on every OS; only the wiring to the real tools is per OS.
//
// Addresses are diffed against what the interface has. Routes are diffed
// against the routes this cmdNet added: the tunnel interface dies with the
// daemon on both OSes (utun with its file descriptor, Wintun with its
// session), so no route of ours outlives it, and a route someone else added
// through the interface is never touched.
type cmdNet struct {
	name  string
	cmds  tunnelCmds
	run   runner
	addrs func() ([]netip.Prefix, error) // the interface's addresses now

	mu     sync.Mutex
	routes map[netip.Prefix]bool // the routes this cmdNet added
}

// runner runs argv and returns its combined output.
type runner func(argv []string) ([]byte, error)

// tunnelCmds builds the command lines that change one interface.
type tunnelCmds interface {
	up(name string) [][]string
	addAddress(name string, p netip.Prefix) []string
	delAddress(name string, p netip.Prefix) []string
	addRoute(name string, p netip.Prefix) []string
	delRoute(name string, p netip.Prefix) []string
	// notFound reports whether a failed delete's output says there was
	// nothing to delete (the route went with a flapping interface).
	notFound(out []byte) bool
}

func newCmdNet(name string, cmds tunnelCmds, run runner, addrs func() ([]netip.Prefix, error)) *cmdNet {
	return &cmdNet{name: name, cmds: cmds, run: run, addrs: addrs, routes: map[netip.Prefix]bool{}}
}

func (n *cmdNet) exec(what string, argv []string) ([]byte, error) {
	out, err := n.run(argv)
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if msg != "" {
			err = fmt.Errorf("%w: %s", err, msg)
		}
		return out, fmt.Errorf("%s: %s: %w", what, strings.Join(argv, " "), err)
	}
	return out, nil
}

func (n *cmdNet) Up() error {
	for _, argv := range n.cmds.up(n.name) {
		if _, err := n.exec("set "+n.name+" up", argv); err != nil {
			return err
		}
	}
	return nil
}

func (n *cmdNet) SetAddresses(addrs []netip.Prefix) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	have, err := n.addrs()
	if err != nil {
		return fmt.Errorf("list addresses of %s: %w", n.name, err)
	}
	have = slices.DeleteFunc(slices.Clone(have), func(p netip.Prefix) bool {
		return p.Addr().IsLinkLocalUnicast() // the OS's own fe80:: address
	})
	add, del := diffPrefixes(have, addrs)
	// New addresses first, so a change of address never leaves none.
	for _, p := range add {
		if _, err := n.exec(fmt.Sprintf("add address %s to %s", p, n.name), n.cmds.addAddress(n.name, p)); err != nil {
			return err
		}
	}
	for _, p := range del {
		if out, err := n.exec(fmt.Sprintf("remove address %s from %s", p, n.name), n.cmds.delAddress(n.name, p)); err != nil && !n.cmds.notFound(out) {
			return err
		}
	}
	return nil
}

func (n *cmdNet) SetRoutes(routes []netip.Prefix) error {
	want := make([]netip.Prefix, 0, len(routes))
	for _, r := range routes {
		want = append(want, r.Masked())
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	ours := make([]netip.Prefix, 0, len(n.routes))
	for p := range n.routes {
		ours = append(ours, p)
	}
	add, del := diffPrefixes(ours, want)
	var errs []error
	for _, p := range del {
		out, err := n.exec(fmt.Sprintf("remove route %s via %s", p, n.name), n.cmds.delRoute(n.name, p))
		if err != nil && !n.cmds.notFound(out) {
			errs = append(errs, err) // still ours: the next call tries again
			continue
		}
		delete(n.routes, p)
	}
	for _, p := range add {
		if _, err := n.exec(fmt.Sprintf("add route %s via %s", p, n.name), n.cmds.addRoute(n.name, p)); err != nil {
			errs = append(errs, err)
			continue
		}
		n.routes[p] = true
	}
	return errors.Join(errs...)
}

// diffPrefixes says what to add to have and remove from it to get want,
// each in a stable order (want's, then have's), without duplicates.
func diffPrefixes(have, want []netip.Prefix) (add, del []netip.Prefix) {
	in := func(ps []netip.Prefix, p netip.Prefix) bool { return slices.Contains(ps, p) }
	for _, p := range want {
		if !in(have, p) && !in(add, p) {
			add = append(add, p)
		}
	}
	for _, p := range have {
		if !in(want, p) && !in(del, p) {
			del = append(del, p)
		}
	}
	return add, del
}

// interfaceAddrs returns the addresses of the interface named name, as the
// Go runtime reads them (getifaddrs on macOS, GetAdaptersAddresses on
// Windows).
func interfaceAddrs(name string) ([]netip.Prefix, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return nil, err
	}
	as, err := ifi.Addrs()
	if err != nil {
		return nil, err
	}
	var out []netip.Prefix
	for _, a := range as {
		if n, ok := a.(*net.IPNet); ok {
			if p, ok := prefixOfIPNet(n); ok {
				out = append(out, p)
			}
		}
	}
	return out, nil
}

func prefixOfIPNet(n *net.IPNet) (netip.Prefix, bool) {
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ones, bits := n.Mask.Size()
	if bits == 0 {
		return netip.Prefix{}, false
	}
	a = a.Unmap()
	if a.Is4() && bits == 128 {
		ones -= 96
	}
	return netip.PrefixFrom(a, ones), true
}

// utunCmds are macOS's: ifconfig and route on a point-to-point utun device.
type utunCmds struct{}

func (utunCmds) up(name string) [][]string { return [][]string{{"/sbin/ifconfig", name, "up"}} }

func (utunCmds) addAddress(name string, p netip.Prefix) []string {
	if p.Addr().Is4() {
		// utun is point to point: the destination is the address itself.
		return []string{"/sbin/ifconfig", name, "inet", p.String(), p.Addr().String(), "alias"}
	}
	return []string{"/sbin/ifconfig", name, "inet6", p.Addr().String(), "prefixlen", fmt.Sprint(p.Bits()), "alias"}
}

func (utunCmds) delAddress(name string, p netip.Prefix) []string {
	return []string{"/sbin/ifconfig", name, family(p, "inet", "inet6"), p.Addr().String(), "-alias"}
}

func (utunCmds) addRoute(name string, p netip.Prefix) []string {
	return []string{"/sbin/route", "-q", "-n", "add", family(p, "-inet", "-inet6"), p.String(), "-interface", name}
}

func (utunCmds) delRoute(name string, p netip.Prefix) []string {
	return []string{"/sbin/route", "-q", "-n", "delete", family(p, "-inet", "-inet6"), p.String(), "-interface", name}
}

func (utunCmds) notFound(out []byte) bool {
	s := string(out)
	return strings.Contains(s, "not in table") || strings.Contains(s, "Can't assign requested address")
}

// netshCmds are Windows's: netsh on the Wintun adapter, in the active store
// only, so nothing survives a reboot.
type netshCmds struct{ netsh string }

func (netshCmds) up(string) [][]string { return nil } // a Wintun adapter is up while its session runs

func (c netshCmds) addAddress(name string, p netip.Prefix) []string {
	if p.Addr().Is4() {
		mask := net.IP(net.CIDRMask(p.Bits(), 32)).String()
		return []string{c.netsh, "interface", "ipv4", "add", "address", "name=" + name,
			"address=" + p.Addr().String(), "mask=" + mask, "store=active"}
	}
	return []string{c.netsh, "interface", "ipv6", "add", "address", "interface=" + name,
		"address=" + p.String(), "store=active"}
}

func (c netshCmds) delAddress(name string, p netip.Prefix) []string {
	if p.Addr().Is4() {
		return []string{c.netsh, "interface", "ipv4", "delete", "address", "name=" + name, "address=" + p.Addr().String()}
	}
	return []string{c.netsh, "interface", "ipv6", "delete", "address", "interface=" + name, "address=" + p.Addr().String()}
}

func (c netshCmds) addRoute(name string, p netip.Prefix) []string {
	return []string{c.netsh, "interface", family(p, "ipv4", "ipv6"), "add", "route", "prefix=" + p.String(),
		"interface=" + name, "store=active"}
}

func (c netshCmds) delRoute(name string, p netip.Prefix) []string {
	return []string{c.netsh, "interface", family(p, "ipv4", "ipv6"), "delete", "route", "prefix=" + p.String(),
		"interface=" + name, "store=active"}
}

func (netshCmds) notFound(out []byte) bool {
	return strings.Contains(string(out), "Element not found")
}

// checkNetshName refuses an interface name netsh would split or misread:
// netsh takes name=VALUE as one argument, without quoting.
func checkNetshName(name string) error {
	if name == "" || strings.ContainsAny(name, " \t\"=") {
		return fmt.Errorf("interface name %q: want a name without spaces, quotes or '='", name)
	}
	return nil
}

func family(p netip.Prefix, v4, v6 string) string {
	if p.Addr().Is4() {
		return v4
	}
	return v6
}
