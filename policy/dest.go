package policy

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// ParseDest reads one destination of an allow rule:
//
//   - everything
//     10.96.0.20                one address, every port and protocol
//     10.96.0.0/16:80-443/tcp   a prefix, a port range, a protocol
//     *:53/udp                  any address, one port
//     [fd00::1]:443  fd00::/64  IPv6, in brackets when a port follows
//
// A port without a protocol means TCP and UDP; ICMP takes no port.
func ParseDest(s string) (Dest, error) {
	d := Dest{PortLo: 0, PortHi: 65535}
	if s == "*" {
		return d, nil
	}
	if i := strings.LastIndexByte(s, '/'); i >= 0 && isWord(s[i+1:]) {
		switch s[i+1:] {
		case "tcp":
			d.Proto = TCP
		case "udp":
			d.Proto = UDP
		case "icmp":
			d.Proto = ICMP
		default:
			return d, fmt.Errorf("%q: unknown protocol %q (tcp, udp or icmp)", clip(s), clip(s[i+1:]))
		}
		s = s[:i]
	}
	addr, port, err := splitHostPort(s)
	if err != nil {
		return d, err
	}
	if d.Prefix, err = parseAddrOrPrefix(addr); err != nil {
		return d, err
	}
	if port != "" {
		if d.Proto == ICMP {
			return d, fmt.Errorf("%q: ICMP has no ports", clip(s))
		}
		if d.PortLo, d.PortHi, err = parsePorts(port); err != nil {
			return d, fmt.Errorf("%q: %v", clip(s), err)
		}
	}
	return d, nil
}

// splitHostPort splits "addr[:port]" where an IPv6 address with a port is
// in brackets; a bare IPv6 address (more than one colon) has no port.
func splitHostPort(s string) (addr, port string, err error) {
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", "", fmt.Errorf("%q: no closing ']'", clip(s))
		}
		addr, rest := s[1:end], s[end+1:]
		if rest == "" {
			return addr, "", nil
		}
		if !strings.HasPrefix(rest, ":") || rest == ":" {
			return "", "", fmt.Errorf("%q: after ']' comes ':PORT' or nothing", clip(s))
		}
		return addr, rest[1:], nil
	}
	switch strings.Count(s, ":") {
	case 0:
		return s, "", nil
	case 1:
		addr, port, _ := strings.Cut(s, ":")
		if port == "" {
			return "", "", fmt.Errorf("%q: no port after ':'", clip(s))
		}
		return addr, port, nil
	}
	return s, "", nil
}

func parseAddrOrPrefix(s string) (netip.Prefix, error) {
	if s == "*" {
		return netip.Prefix{}, nil
	}
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return p, fmt.Errorf("%q is not a prefix (like 10.96.0.0/16 or fd00::/64)", clip(s))
		}
		if p.Addr().Is4In6() {
			return p, fmt.Errorf("%q: write an IPv4 prefix as IPv4", clip(s))
		}
		if p.Masked() != p {
			return p, fmt.Errorf("%q has bits set past its length: did you mean %s?", clip(s), p.Masked())
		}
		return p, nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("%q is not an IP address, prefix or *", clip(s))
	}
	if a.Is4In6() {
		return netip.Prefix{}, fmt.Errorf("%q: write an IPv4 address as IPv4", clip(s))
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

func parsePorts(s string) (lo, hi uint16, err error) {
	if s == "*" {
		return 0, 65535, nil
	}
	a, b, isRange := strings.Cut(s, "-")
	if lo, err = parsePort(a); err != nil {
		return 0, 0, err
	}
	if !isRange {
		return lo, lo, nil
	}
	if hi, err = parsePort(b); err != nil {
		return 0, 0, err
	}
	if hi < lo {
		return 0, 0, fmt.Errorf("port range %d-%d runs backwards", lo, hi)
	}
	return lo, hi, nil
}

func parsePort(s string) (uint16, error) {
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n == 0 || (len(s) > 1 && s[0] == '0') {
		return 0, fmt.Errorf("port %q is not a number from 1 to 65535", clip(s))
	}
	return uint16(n), nil
}

func isWord(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// String writes the destination as ParseDest reads it.
func (d Dest) String() string {
	if !d.Prefix.IsValid() && d.AllPorts() && d.Proto == AnyProto {
		return "*"
	}
	addr := "*"
	if d.Prefix.IsValid() {
		if d.Prefix.IsSingleIP() {
			addr = d.Prefix.Addr().String()
		} else {
			addr = d.Prefix.String()
		}
	}
	var b strings.Builder
	if !d.AllPorts() {
		if d.Prefix.Addr().Is6() {
			addr = "[" + addr + "]"
		}
		b.WriteString(addr + ":" + strconv.Itoa(int(d.PortLo)))
		if d.PortHi != d.PortLo {
			b.WriteString("-" + strconv.Itoa(int(d.PortHi)))
		}
	} else {
		b.WriteString(addr)
	}
	if d.Proto != AnyProto {
		b.WriteString("/" + d.Proto.String())
	}
	return b.String()
}

// Packet is what a reach question or a gateway asks about: a destination
// address, protocol and port (0 for ICMP and other protocols).
type Packet struct {
	Addr  netip.Addr
	Proto Proto // AnyProto: a protocol other than TCP, UDP and ICMP
	Port  uint16
}

func (k Packet) String() string {
	s := k.Addr.String()
	if k.Proto == TCP || k.Proto == UDP {
		if k.Addr.Is6() {
			s = "[" + s + "]"
		}
		s += ":" + strconv.Itoa(int(k.Port))
	}
	if k.Proto != AnyProto {
		s += "/" + k.Proto.String()
	}
	return s
}

// Matches reports whether the destination covers the packet.
func (d Dest) Matches(k Packet) bool {
	a := k.Addr.Unmap()
	if d.Prefix.IsValid() && !d.Prefix.Contains(a) {
		return false
	}
	switch d.Proto {
	case AnyProto:
		if !d.AllPorts() && k.Proto != TCP && k.Proto != UDP {
			return false
		}
	default:
		if d.Proto != k.Proto {
			return false
		}
	}
	if k.Proto != TCP && k.Proto != UDP {
		return true
	}
	return k.Port >= d.PortLo && k.Port <= d.PortHi
}
