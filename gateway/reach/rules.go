package reach

import (
	"fmt"
	"net/netip"
	"slices"
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

// Ruleset is the table as data: what the per-OS file programs (on Linux
// nftables through netlink, the table deleted and made again in one
// batch) and what String prints, in nft's own syntax, for logs and tests.
type Ruleset struct {
	Counters []string // named counters
	Sets     []Set
	Chains   []Chain
}

// Set is a named interval set of addresses of one family.
type Set struct {
	Name  string
	IPv6  bool
	Elems []netip.Prefix // none contains another
}

// Chain is a base chain of the table.
type Chain struct {
	Name     string
	Type     string // filter, nat
	Hook     string // prerouting, output, postrouting
	Priority int    // raw -300, mangle -150, srcnat 100
	Rules    []Rule
}

// IP protocol numbers the rules match (meta l4proto).
const (
	ProtoICMP = 1
	ProtoTCP  = 6
	ProtoUDP  = 17
)

// Rule matches a packet when every field set among its matches does, then
// runs its statements in the order of the fields.
type Rule struct {
	// Matches.
	IIfName    string // iifname == (the whole name)
	NotIIfName string // iifname !=
	OIfName    string // oifname ==
	IP         int    // 4 or 6: the family of Saddr and Daddr (meta nfproto)
	Saddr      Addr
	Daddr      Addr
	L4Protos   []byte // meta l4proto, one of
	ICMPEcho   bool   // icmp type echo-request (IPv4)
	FibLocal   bool   // fib daddr type local: an address of the node
	// Statements.
	Counter    string // the named counter counts the packet
	Notrack    bool
	TProxy     int    // tproxy to this port of the listener (family IP)
	SetMark    uint32 // meta mark set
	Masquerade bool
	Verdict    string // "", accept, drop
}

// Addr is an address match: a named set or one prefix (invalid: none).
type Addr struct {
	Set    string
	Prefix netip.Prefix
}

func (a Addr) isSet() bool { return a.Set != "" || a.Prefix.IsValid() }

// Rules is the ruleset for s with the transparent listeners on p.
func Rules(s Spec, p Ports) Ruleset {
	var rs Ruleset
	rs.Counters = append(rs.Counters, DropReasons...)
	inside, mapped := Addr{Set: "inside"}, Addr{Set: "mapped"}
	if len(s.Prefixes) == 0 {
		inside = Addr{}
	} else {
		rs.Sets = append(rs.Sets, Set{Name: "inside", Elems: disjoint(s.Prefixes)})
	}
	if !s.Mapped.IsValid() || len(s.Prefixes) == 0 {
		mapped = Addr{}
	} else {
		var mps []netip.Prefix
		for _, x := range s.Prefixes {
			mps = append(mps, api.MappedPrefix(s.Mapped, x))
		}
		rs.Sets = append(rs.Sets, Set{Name: "mapped", IPv6: true, Elems: disjoint(mps)})
	}
	tcpudp := []byte{ProtoTCP, ProtoUDP}
	// What TPROXY takes is never tracked, so the cluster's own NAT
	// (kube-proxy's ClusterIP DNAT in prerouting) leaves it alone: the
	// device's connection ends at the node's listener, and the node's own
	// connection to the target is what the cluster translates. ICMP stays
	// tracked: its source NAT needs conntrack.
	if inside.isSet() {
		raw := []Chain{{Name: "raw_prerouting", Type: "filter", Hook: "prerouting", Priority: -300},
			{Name: "raw_output", Type: "filter", Hook: "output", Priority: -300}}
		raw[0].Rules = append(raw[0].Rules, Rule{IIfName: s.Interface, IP: 4, Daddr: inside, L4Protos: tcpudp, Notrack: true})
		raw[1].Rules = append(raw[1].Rules, Rule{OIfName: s.Interface, IP: 4, Saddr: inside, L4Protos: tcpudp, Notrack: true})
		if mapped.isSet() {
			raw[0].Rules = append(raw[0].Rules, Rule{IIfName: s.Interface, IP: 6, Daddr: mapped, L4Protos: tcpudp, Notrack: true})
			raw[1].Rules = append(raw[1].Rules, Rule{OIfName: s.Interface, IP: 6, Saddr: mapped, L4Protos: tcpudp, Notrack: true})
		}
		rs.Chains = append(rs.Chains, raw...)
	}
	rs.Chains = append(rs.Chains, Chain{Name: "prerouting", Type: "filter", Hook: "prerouting", Priority: -150, Rules: preroutingRules(s, p, inside, mapped)})
	if inside.isSet() && s.DevicePool.IsValid() {
		// Echo requests into the cluster leave from the node's own address
		// (conntrack turns the replies back to the device), so no node or
		// pod needs a route to the devices.
		rs.Chains = append(rs.Chains, Chain{Name: "postrouting", Type: "nat", Hook: "postrouting", Priority: 100, Rules: []Rule{
			{IP: 4, Saddr: Addr{Prefix: s.DevicePool}, Daddr: inside, L4Protos: []byte{ProtoICMP}, Masquerade: true},
		}})
	}
	return rs
}

// preroutingRules sort what devices send: to the VPN server's address,
// into the cluster (TPROXY to the listeners; ICMP echo forwarded), or
// dropped and counted by reason.
func preroutingRules(s Spec, p Ports, inside, mapped Addr) []Rule {
	rules := []Rule{{NotIIfName: s.Interface, Verdict: "accept"}}
	if s.Server.IsValid() {
		rules = append(rules, Rule{IP: 4, Daddr: Addr{Prefix: netip.PrefixFrom(s.Server, 32)}, Verdict: "accept"})
	}
	tproxy := func(ip int, to Addr, proto byte, port int) {
		if port != 0 {
			rules = append(rules, Rule{IP: ip, Daddr: to, L4Protos: []byte{proto}, TProxy: port, SetMark: Mark, Verdict: "accept"})
		}
	}
	if inside.isSet() {
		tproxy(4, inside, ProtoTCP, p.TCP4)
		tproxy(4, inside, ProtoUDP, p.UDP4)
	}
	if mapped.isSet() {
		tproxy(6, mapped, ProtoTCP, p.TCP6)
		tproxy(6, mapped, ProtoUDP, p.UDP6)
		// ICMPv6 under the mapped range would need translating to ICMP.
		rules = append(rules, Rule{IP: 6, Daddr: mapped, Counter: DropProtocol, Verdict: "drop"})
	}
	if inside.isSet() {
		if s.DevicePool.IsValid() {
			rules = append(rules, Rule{IP: 4, Saddr: Addr{Prefix: s.DevicePool}, Daddr: inside, ICMPEcho: true, Verdict: "accept"})
		}
		rules = append(rules, Rule{IP: 4, Daddr: inside, Counter: DropProtocol, Verdict: "drop"})
	}
	if s.DevicePool.IsValid() {
		rules = append(rules, Rule{IP: 4, Daddr: Addr{Prefix: s.DevicePool}, Counter: DropDevice, Verdict: "drop"})
	}
	return append(rules,
		Rule{IP: 6, Daddr: Addr{Prefix: deviceRange6()}, Counter: DropDevice, Verdict: "drop"},
		Rule{FibLocal: true, Counter: DropNode, Verdict: "drop"},
		Rule{Counter: DropUndeclared, Verdict: "drop"})
}

// disjoint sorts ps and leaves out those another one contains (an
// interval set refuses overlapping elements).
func disjoint(ps []netip.Prefix) []netip.Prefix {
	s := make([]netip.Prefix, 0, len(ps))
	for _, p := range ps {
		s = append(s, p.Masked())
	}
	slices.SortFunc(s, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	var out []netip.Prefix
	for _, p := range s {
		if n := len(out); n > 0 && out[n-1].Overlaps(p) {
			continue // sorted: the one before starts no later and is no smaller
		}
		out = append(out, p)
	}
	return out
}

// deviceRange6 is where every device's IPv6 tunnel address lies.
func deviceRange6() netip.Prefix {
	return netip.PrefixFrom(api.DeviceAddr6(netip.IPv4Unspecified()), 96)
}

// String prints the ruleset as `nft list table inet runos_reach` does
// (sets' elements on one line).
func (rs Ruleset) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "table inet %s {\n", Table)
	for _, c := range rs.Counters {
		fmt.Fprintf(&b, "\tcounter %s {\n\t}\n\n", c)
	}
	for _, s := range rs.Sets {
		typ := "ipv4_addr"
		if s.IPv6 {
			typ = "ipv6_addr"
		}
		var es []string
		for _, e := range s.Elems {
			es = append(es, e.String())
		}
		fmt.Fprintf(&b, "\tset %s {\n\t\ttype %s\n\t\tflags interval\n\t\telements = { %s }\n\t}\n\n", s.Name, typ, strings.Join(es, ", "))
	}
	for i, c := range rs.Chains {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "\tchain %s {\n\t\ttype %s hook %s priority %s; policy accept;\n", c.Name, c.Type, c.Hook, priorityName(c.Priority))
		for _, r := range c.Rules {
			fmt.Fprintf(&b, "\t\t%s\n", r)
		}
		b.WriteString("\t}\n")
	}
	b.WriteString("}\n")
	return b.String()
}

func priorityName(p int) string {
	switch p {
	case -300:
		return "raw"
	case -150:
		return "mangle"
	case 100:
		return "srcnat"
	}
	return fmt.Sprint(p)
}

// String is the rule in nft's syntax.
func (r Rule) String() string {
	var f []string
	add := func(format string, a ...any) { f = append(f, fmt.Sprintf(format, a...)) }
	if r.IIfName != "" {
		add("iifname %q", r.IIfName)
	}
	if r.NotIIfName != "" {
		add("iifname != %q", r.NotIIfName)
	}
	if r.OIfName != "" {
		add("oifname %q", r.OIfName)
	}
	ip := "ip"
	if r.IP == 6 {
		ip = "ip6"
	}
	for _, a := range []struct {
		field string
		Addr
	}{{"saddr", r.Saddr}, {"daddr", r.Daddr}} {
		switch {
		case a.Set != "":
			add("%s %s @%s", ip, a.field, a.Set)
		case a.Prefix.IsSingleIP():
			add("%s %s %s", ip, a.field, a.Prefix.Addr())
		case a.Prefix.IsValid():
			add("%s %s %s", ip, a.field, a.Prefix)
		}
	}
	if r.ICMPEcho {
		add("icmp type echo-request")
	} else if len(r.L4Protos) > 0 {
		var ps []string
		for _, p := range r.L4Protos {
			ps = append(ps, protoName(p))
		}
		if len(ps) == 1 {
			add("meta l4proto %s", ps[0])
		} else {
			add("meta l4proto { %s }", strings.Join(ps, ", "))
		}
	}
	if r.FibLocal {
		add("fib daddr type local")
	}
	if r.Counter != "" {
		add("counter name %q", r.Counter)
	}
	if r.Notrack {
		add("notrack")
	}
	if r.TProxy != 0 {
		add("tproxy %s to :%d", ip, r.TProxy)
	}
	if r.SetMark != 0 {
		add("meta mark set 0x%08x", r.SetMark)
	}
	if r.Masquerade {
		add("masquerade")
	}
	if r.Verdict != "" {
		add("%s", r.Verdict)
	}
	return strings.Join(f, " ")
}

func protoName(p byte) string {
	switch p {
	case ProtoICMP:
		return "icmp"
	case ProtoTCP:
		return "tcp"
	case ProtoUDP:
		return "udp"
	}
	return fmt.Sprint(p)
}
