//go:build !windows

package lab

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// What Block holds back on a laptop's network.
const (
	// BlockUDP: no UDP to or from the nodes (a hotel or corporate network
	// that lets TCP 443 through and little else).
	BlockUDP = "udp"
	// BlockCaptive: a captive portal: no UDP and no HTTPS to the nodes,
	// and plain HTTP to anywhere answered by the portal with a redirect to
	// its sign-in page.
	BlockCaptive = "captive"
)

// Portal is the lab's captive portal: it runs on the lan host (the LAN's
// router) and redirects every plain HTTP request to its sign-in page.
const (
	PortalListen = "10.77.0.53:8081"
	PortalURL    = "http://portal.lab.runos/login"
)

// nftables tables the lab adds inside a laptop's (or the router's)
// network namespace; nothing outside the lab's namespaces is touched.
const (
	blockTable  = "runos_lab_block"
	portalTable = "runos_lab_portal"
	routerTable = "runos_lab_router"
)

// Block holds back what on a laptop's network with nftables inside the
// laptop's namespace, replacing any earlier Block there.
func (l *Lab) Block(ctx context.Context, host, what string) error {
	h, ok := l.topo.Host(host)
	if !ok || h.Kind != KindLaptop {
		return fmt.Errorf("block: %q is not a laptop of this lab (laptops: %s)", host, strings.Join(l.laptopNames(), ", "))
	}
	if what != BlockUDP && what != BlockCaptive {
		return fmt.Errorf("block %s: want %s or %s", what, BlockUDP, BlockCaptive)
	}
	if err := l.Unblock(ctx, host); err != nil {
		return err
	}
	nodes := strings.Join(l.nodeAddrs(), ", ")
	rules := fmt.Sprintf(`table inet %[1]s {
	chain output {
		type filter hook output priority 0; policy accept;
		ip daddr { %[2]s } meta l4proto udp drop
	}
	chain input {
		type filter hook input priority 0; policy accept;
		ip saddr { %[2]s } meta l4proto udp drop
	}
}
`, blockTable, nodes)
	if what == BlockCaptive {
		if err := l.ensurePortal(ctx); err != nil {
			return err
		}
		portal := netip.MustParseAddrPort(PortalListen)
		rules = fmt.Sprintf(`table inet %[1]s {
	chain output {
		type filter hook output priority 0; policy accept;
		ip daddr { %[2]s } meta l4proto udp drop
		ip daddr { %[2]s } tcp dport 443 reject with tcp reset
	}
	chain input {
		type filter hook input priority 0; policy accept;
		ip saddr { %[2]s } meta l4proto udp drop
	}
}
table ip %[3]s {
	chain output {
		type nat hook output priority -100; policy accept;
		ip daddr != %[4]s tcp dport 80 dnat to %[5]s
	}
}
`, blockTable, nodes, portalTable, portal.Addr(), portal)
	}
	return l.nft(ctx, host, "block-"+what, rules)
}

// Unblock removes what Block added on a laptop (nothing if it added none).
func (l *Lab) Unblock(ctx context.Context, host string) error {
	if _, ok := l.topo.Host(host); !ok {
		return fmt.Errorf("unblock: no host %q in this lab", host)
	}
	for _, t := range []string{"inet " + blockTable, "ip " + portalTable} {
		if _, err := l.run.Run(ctx, "ip", "netns", "exec", l.names.Netns(host), "nft", "delete", "table", t); err != nil &&
			!strings.Contains(err.Error(), "No such file or directory") {
			return fmt.Errorf("unblock %s: %w", host, err)
		}
	}
	return nil
}

// nft loads rules into a host's namespace from a file kept in the host's
// directory (what was applied stays readable there).
func (l *Lab) nft(ctx context.Context, host, name, rules string) error {
	if _, err := exec.LookPath("nft"); err != nil {
		return errors.New("nft not found: apt-get install nftables")
	}
	file := filepath.Join(l.hostDir(host), name+".nft")
	if err := os.WriteFile(file, []byte(rules), 0o644); err != nil {
		return err
	}
	if _, err := l.run.Run(ctx, "ip", "netns", "exec", l.names.Netns(host), "nft", "-f", file); err != nil {
		return fmt.Errorf("%s on %s: %w", name, host, err)
	}
	return nil
}

// nodeAddrs are every address of every node.
func (l *Lab) nodeAddrs() []string {
	var out []string
	for _, h := range l.topo.Hosts {
		if h.Kind != KindNode {
			continue
		}
		for _, a := range h.Addrs {
			out = append(out, a.String())
		}
	}
	slices.Sort(out)
	return out
}

func (l *Lab) laptopNames() []string {
	var out []string
	for _, h := range l.topo.Laptops() {
		out = append(out, h.Name)
	}
	return out
}

// ensurePortal starts the captive portal on the lan host, once.
func (l *Lab) ensurePortal(ctx context.Context) error {
	if p, ok := l.Proc("lan", "portal"); ok && p.Alive() {
		return nil
	}
	p := Proc{Host: "lan", Name: "portal", Argv: []string{filepath.Join(l.bin, "runos-lab"), "portal",
		"--listen", PortalListen, "--redirect", PortalURL}}
	if _, err := l.Start(p); err != nil {
		return err
	}
	if err := l.writeEnv(); err != nil {
		return err
	}
	return l.waitProc(ctx, p)
}

// Uplink puts a laptop on one segment (the other's link down, its address
// gone) with the default route through that segment's router (the lan
// host, which NATs the LAN onto the WAN), or back on both with no default
// route, as the lab starts. Like a DHCP client it rewrites the laptop's
// resolv.conf for the new network.
func (l *Lab) Uplink(ctx context.Context, host, seg string) error {
	h, ok := l.topo.Host(host)
	if !ok || h.Kind != KindLaptop {
		return fmt.Errorf("uplink: %q is not a laptop of this lab (laptops: %s)", host, strings.Join(l.laptopNames(), ", "))
	}
	if seg != WAN && seg != LAN && seg != "both" {
		return fmt.Errorf("uplink %s: want lan, wan or both", seg)
	}
	if err := l.ensureRouter(ctx); err != nil {
		return err
	}
	ns := l.names.Netns(host)
	var steps [][]string
	for _, s := range l.topo.Segments {
		ifc, addr := HostIf(s.Name), fmt.Sprintf("%s/%d", h.Addrs[s.Name], s.Prefix.Bits())
		if seg == "both" || seg == s.Name {
			steps = append(steps, []string{"-n", ns, "link", "set", ifc, "up"},
				[]string{"-n", ns, "addr", "replace", addr, "dev", ifc})
		} else {
			steps = append(steps, []string{"-n", ns, "addr", "flush", "dev", ifc},
				[]string{"-n", ns, "link", "set", ifc, "down"})
		}
	}
	_ = l.ip(ctx, "-n", ns, "route", "del", "default") // none yet, the first time
	switch seg {
	case LAN:
		steps = append(steps, []string{"-n", ns, "route", "add", "default", "via", l.topo.ResolverIP.String()})
	case WAN:
		steps = append(steps, []string{"-n", ns, "route", "add", "default", "via", RouterWAN.String()})
	}
	for _, args := range steps {
		if err := l.ip(ctx, args...); err != nil {
			return fmt.Errorf("uplink %s %s: %w", host, seg, err)
		}
	}
	// A DHCP client on the new network writes resolv.conf (in place: it is
	// a bind mount inside the laptop).
	rc := fmt.Sprintf("# RunOS lab host %s: written by DHCP on %s\nnameserver %s\n", host, seg, l.topo.ResolverIP)
	f, err := os.OpenFile(filepath.Join(l.hostDir(host), "resolv.conf"), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteString(rc)
	return err
}

// ensureRouter makes the lan host a home router (idempotent): the LAN goes
// out to the WAN behind NAT, and nothing from the WAN comes into the LAN
// but answers (a laptop on the WAN cannot reach a node's private ingress).
func (l *Lab) ensureRouter(ctx context.Context) error {
	ns := l.names.Netns("lan")
	if _, err := l.run.Run(ctx, "ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv4.ip_forward=1"); err != nil {
		return fmt.Errorf("router: %w", err)
	}
	if _, err := l.run.Run(ctx, "ip", "netns", "exec", ns, "nft", "list", "table", "ip", routerTable); err == nil {
		return nil
	}
	return l.nft(ctx, "lan", "router", fmt.Sprintf(`table ip %[1]s {
	chain postrouting {
		type nat hook postrouting priority 100; policy accept;
		oifname "%[2]s" ip saddr %[3]s masquerade
	}
	chain forward {
		type filter hook forward priority 0; policy accept;
		iifname "%[2]s" ct state established,related accept
		iifname "%[2]s" drop
	}
}
`, routerTable, HostIf(WAN), lanPrefix))
}

// SetMTU sets the MTU of a host's links (both segments): a smaller path
// under the tunnel, as on a tunnel over a tunnel.
func (l *Lab) SetMTU(ctx context.Context, host string, mtu int) error {
	h, ok := l.topo.Host(host)
	if !ok {
		return fmt.Errorf("mtu: no host %q in this lab", host)
	}
	if mtu < 576 || mtu > 9000 {
		return fmt.Errorf("mtu %d: want 576 to 9000", mtu)
	}
	for seg := range h.Addrs {
		if err := l.ip(ctx, "-n", l.names.Netns(host), "link", "set", HostIf(seg), "mtu", strconv.Itoa(mtu)); err != nil {
			return fmt.Errorf("mtu %s: %w", host, err)
		}
	}
	return nil
}
