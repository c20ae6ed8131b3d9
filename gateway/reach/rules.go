package reach

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/runos/vpn/api"
)

// Table is the nftables table of this package (family inet).
const Table = "runos_reach"

// Mark marks the packets TPROXY takes, so that policy routing delivers
// them locally (RouteTable holds the local default route).
const (
	Mark       = 0x52530001
	RouteTable = 5253
)

// Ports are the transparent listeners' ports.
type Ports struct{ TCP4, TCP6, UDP4, UDP6 int }

// Ruleset is the nftables ruleset for s with the transparent listeners on
// p, as `nft -f` reads it: the table is deleted and made again in one
// transaction.
func Ruleset(s Spec, p Ports) string {
	var b strings.Builder
	fmt.Fprintf(&b, "table inet %s\ndelete table inet %s\ntable inet %s {\n", Table, Table, Table)
	for _, r := range DropReasons {
		fmt.Fprintf(&b, "\tcounter %s {\n\t}\n", r)
	}
	var ps, mps []string
	for _, x := range s.Prefixes {
		ps = append(ps, x.String())
		if s.Mapped.IsValid() {
			mps = append(mps, api.MappedPrefix(s.Mapped, x).String())
		}
	}
	inside, mapped := strings.Join(ps, ", "), strings.Join(mps, ", ")
	// What TPROXY takes is never tracked, so the cluster's own NAT
	// (kube-proxy's ClusterIP DNAT in prerouting) leaves it alone: the
	// device's connection ends at the node's listener, and the node's own
	// connection to the target is what the cluster translates.
	if inside != "" {
		fmt.Fprintf(&b, "\tchain raw_prerouting {\n\t\ttype filter hook prerouting priority raw; policy accept;\n")
		fmt.Fprintf(&b, "\t\tiifname %q ip daddr { %s } meta l4proto { tcp, udp } notrack\n", s.Interface, inside)
		if mapped != "" {
			fmt.Fprintf(&b, "\t\tiifname %q ip6 daddr { %s } meta l4proto { tcp, udp } notrack\n", s.Interface, mapped)
		}
		fmt.Fprintf(&b, "\t}\n\tchain raw_output {\n\t\ttype filter hook output priority raw; policy accept;\n")
		fmt.Fprintf(&b, "\t\toifname %q ip saddr { %s } meta l4proto { tcp, udp } notrack\n", s.Interface, inside)
		if mapped != "" {
			fmt.Fprintf(&b, "\t\toifname %q ip6 saddr { %s } meta l4proto { tcp, udp } notrack\n", s.Interface, mapped)
		}
		fmt.Fprintf(&b, "\t}\n")
	}
	fmt.Fprintf(&b, "\tchain prerouting {\n\t\ttype filter hook prerouting priority mangle; policy accept;\n")
	fmt.Fprintf(&b, "\t\tiifname != %q accept\n", s.Interface)
	if s.Server.IsValid() {
		fmt.Fprintf(&b, "\t\tip daddr %s accept\n", s.Server)
	}
	if inside != "" {
		fmt.Fprintf(&b, "\t\tip daddr { %s } meta l4proto tcp tproxy ip to :%d meta mark set 0x%x accept\n", inside, p.TCP4, Mark)
		if p.UDP4 != 0 {
			fmt.Fprintf(&b, "\t\tip daddr { %s } meta l4proto udp tproxy ip to :%d meta mark set 0x%x accept\n", inside, p.UDP4, Mark)
		}
	}
	if mapped != "" {
		fmt.Fprintf(&b, "\t\tip6 daddr { %s } meta l4proto tcp tproxy ip6 to :%d meta mark set 0x%x accept\n", mapped, p.TCP6, Mark)
		if p.UDP6 != 0 {
			fmt.Fprintf(&b, "\t\tip6 daddr { %s } meta l4proto udp tproxy ip6 to :%d meta mark set 0x%x accept\n", mapped, p.UDP6, Mark)
		}
		fmt.Fprintf(&b, "\t\tip6 daddr { %s } counter name %s drop\n", mapped, DropProtocol)
	}
	if inside != "" {
		fmt.Fprintf(&b, "\t\tip daddr { %s } counter name %s drop\n", inside, DropProtocol)
	}
	if s.DevicePool.IsValid() {
		fmt.Fprintf(&b, "\t\tip daddr %s counter name %s drop\n", s.DevicePool, DropDevice)
	}
	fmt.Fprintf(&b, "\t\tip6 daddr %s counter name %s drop\n", deviceRange6(), DropDevice)
	fmt.Fprintf(&b, "\t\tfib daddr type local counter name %s drop\n", DropNode)
	fmt.Fprintf(&b, "\t\tcounter name %s drop\n\t}\n}\n", DropUndeclared)
	return b.String()
}

// deviceRange6 is where every device's IPv6 tunnel address lies.
func deviceRange6() netip.Prefix {
	return netip.PrefixFrom(api.DeviceAddr6(netip.IPv4Unspecified()), 96)
}
