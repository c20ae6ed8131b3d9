//go:build !windows

package lab

import (
	"context"
	"fmt"
)

// bridge is a segment's bridge inside the switch namespace.
func bridge(seg string) string { return "br-" + seg }

// netnsPath is where iproute2 keeps a named network namespace.
func netnsPath(name string) string { return "/run/netns/" + name }

// buildNetwork makes the switch namespace with one bridge per segment, a
// namespace per host, and a veth pair per host and segment created
// directly in the two namespaces it joins, so nothing of the lab ever
// appears in the root namespace.
func (l *Lab) buildNetwork(ctx context.Context) error {
	sw := l.names.Switch()
	if err := l.addNetns(ctx, sw); err != nil {
		return err
	}
	// The switch only bridges: no addresses, no forwarding between segments.
	for _, s := range l.topo.Segments {
		if err := l.ip(ctx, "-n", sw, "link", "add", bridge(s.Name), "type", "bridge"); err != nil {
			return err
		}
		if err := l.ip(ctx, "-n", sw, "link", "set", bridge(s.Name), "up"); err != nil {
			return err
		}
	}
	for i, h := range l.topo.Hosts {
		ns := l.names.Netns(h.Name)
		if err := l.addNetns(ctx, ns); err != nil {
			return err
		}
		for _, s := range l.topo.Segments {
			addr, ok := h.Addrs[s.Name]
			if !ok {
				continue
			}
			hif, port := HostIf(s.Name), SwitchPort(h.Name, i, s.Name)
			steps := [][]string{
				{"link", "add", "name", hif, "netns", ns, "type", "veth", "peer", "name", port, "netns", sw},
				{"-n", sw, "link", "set", port, "master", bridge(s.Name)},
				{"-n", sw, "link", "set", port, "up"},
				{"-n", ns, "addr", "add", fmt.Sprintf("%s/%d", addr, s.Prefix.Bits()), "dev", hif},
				{"-n", ns, "link", "set", hif, "up"},
			}
			for _, args := range steps {
				if err := l.ip(ctx, args...); err != nil {
					return fmt.Errorf("host %s on %s: %w", h.Name, s.Name, err)
				}
			}
		}
	}
	return nil
}

func (l *Lab) addNetns(ctx context.Context, name string) error {
	if err := l.j.netns(name); err != nil {
		return err
	}
	if err := l.ip(ctx, "netns", "add", name); err != nil {
		return err
	}
	// No duplicate address detection in the lab: no address here can be
	// a duplicate, and DAD makes every new link's IPv6 link-local address
	// change state a second or two after it came up (and wg1's after the
	// daemon starts). Chromium takes that change for a new network and
	// aborts what it is loading (net::ERR_NETWORK_CHANGED): a sign-in
	// form posted then was lost. Set before any link exists, so every
	// link of the namespace, wg1 included, inherits it.
	if _, err := l.run.Run(ctx, "ip", "netns", "exec", name, "sysctl", "-qw",
		"net.ipv6.conf.default.accept_dad=0", "net.ipv6.conf.all.accept_dad=0"); err != nil {
		return err
	}
	return l.ip(ctx, "-n", name, "link", "set", "lo", "up")
}

func (l *Lab) ip(ctx context.Context, args ...string) error {
	_, err := l.run.Run(ctx, "ip", args...)
	return err
}
