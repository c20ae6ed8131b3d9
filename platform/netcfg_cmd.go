package platform

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// The command-line netOps of macOS: each change is one run of ifconfig or
// route. Like opsNet, they compile and are tested on every OS.

// runner runs argv and returns its combined output.
type runner func(argv []string) ([]byte, error)

// runCmd runs argv with run; a failure's error names the command line and
// carries its output, which it also returns (to tell "nothing to delete").
func runCmd(run runner, argv ...string) ([]byte, error) {
	out, err := run(argv)
	if err != nil {
		if msg := strings.TrimSpace(string(out)); msg != "" {
			err = fmt.Errorf("%w: %s", err, msg)
		}
		return out, fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
	}
	return out, nil
}

// delCmd runs a delete; a failure whose output says there was nothing to
// delete wraps errGone.
func delCmd(run runner, notFound func(out []byte) bool, argv ...string) error {
	out, err := runCmd(run, argv...)
	if err != nil && notFound(out) {
		return fmt.Errorf("%w: %w", errGone, err)
	}
	return err
}

// InterfaceAddrs returns the addresses of the interface named name, as the
// Go runtime reads them (getifaddrs on macOS, netlink on Linux).
func InterfaceAddrs(name string) ([]netip.Prefix, error) {
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

// utunOps are macOS's: ifconfig and route on a point-to-point utun device.
type utunOps struct {
	name string
	run  runner
	list func() ([]netip.Prefix, error) // the interface's addresses now
}

func (o utunOps) up() error {
	_, err := runCmd(o.run, "/sbin/ifconfig", o.name, "up")
	return err
}

func (o utunOps) addrs() ([]netip.Prefix, error) { return o.list() }

func (o utunOps) addAddress(p netip.Prefix) error {
	var err error
	if p.Addr().Is4() {
		// utun is point to point: the destination is the address itself.
		_, err = runCmd(o.run, "/sbin/ifconfig", o.name, "inet", p.String(), p.Addr().String(), "alias")
	} else {
		_, err = runCmd(o.run, "/sbin/ifconfig", o.name, "inet6", p.Addr().String(), "prefixlen", fmt.Sprint(p.Bits()), "alias")
	}
	return err
}

func (o utunOps) delAddress(p netip.Prefix) error {
	return delCmd(o.run, utunNotFound, "/sbin/ifconfig", o.name, family(p, "inet", "inet6"), p.Addr().String(), "-alias")
}

func (o utunOps) addRoute(p netip.Prefix) error {
	_, err := runCmd(o.run, "/sbin/route", "-q", "-n", "add", family(p, "-inet", "-inet6"), p.String(), "-interface", o.name)
	return err
}

func (o utunOps) delRoute(p netip.Prefix) error {
	return delCmd(o.run, utunNotFound, "/sbin/route", "-q", "-n", "delete", family(p, "-inet", "-inet6"), p.String(), "-interface", o.name)
}

// utunNotFound reports whether a failed delete's output says there was
// nothing to delete.
func utunNotFound(out []byte) bool {
	s := string(out)
	return strings.Contains(s, "not in table") || strings.Contains(s, "Can't assign requested address")
}

func family(p netip.Prefix, v4, v6 string) string {
	if p.Addr().Is4() {
		return v4
	}
	return v6
}
