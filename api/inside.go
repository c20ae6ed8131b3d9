package api

import (
	"errors"
	"fmt"
	"net/netip"
)

// ClusterInside is what lies inside a cluster, behind its VPN node: the
// prefixes a device may reach through the node (its internal node
// network, pod range and Service range), the cluster's own DNS (kube-dns)
// and the control-plane VIP where the Kubernetes API listens (6443). The
// gateway reports them from its node (runos-gateway's --node-network,
// --pod-range, --service-range, --cluster-dns, --api-vip); control keeps
// them per cluster, shows them and hands them to devices and gateways.
// Clusters made with the usual defaults share these ranges: Mapped is the
// per-cluster range (4via6-style, see MappedAddr) under which they are
// reachable whatever another cluster uses.
type ClusterInside struct {
	NodeNetwork  string `json:"nodeNetwork,omitempty"`  // CIDR
	PodRange     string `json:"podRange,omitempty"`     // CIDR
	ServiceRange string `json:"serviceRange,omitempty"` // CIDR
	DNSServer    string `json:"dnsServer,omitempty"`    // kube-dns' address, inside a prefix
	APIAddress   string `json:"apiAddress,omitempty"`   // the control-plane VIP, inside a prefix
	// Mapped is set by control (never by a gateway): the cluster's mapped
	// IPv6 /96, "" when the cluster has no VPN service.
	Mapped string `json:"mapped,omitempty"`
}

// Prefixes are the declared internal prefixes, masked, in a fixed order
// (node network, pod range, Service range); invalid or empty ones are left
// out (Check tells which).
func (c ClusterInside) Prefixes() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{c.NodeNetwork, c.PodRange, c.ServiceRange} {
		if p, err := netip.ParsePrefix(s); err == nil && p.Addr().Is4() {
			out = append(out, p.Masked())
		}
	}
	return out
}

// Empty reports whether nothing is declared.
func (c ClusterInside) Empty() bool {
	return c.NodeNetwork == "" && c.PodRange == "" && c.ServiceRange == "" && c.DNSServer == "" && c.APIAddress == ""
}

// Check returns an error naming the first field that is not what it must
// be: IPv4 prefixes (8 to 32 bits), never the VPN's own pools, and the
// DNS server and VIP inside one of them.
func (c ClusterInside) Check() error {
	var ps []netip.Prefix
	for _, f := range []struct{ name, v string }{{"node network", c.NodeNetwork}, {"pod range", c.PodRange}, {"service range", c.ServiceRange}} {
		if f.v == "" {
			continue
		}
		p, err := netip.ParsePrefix(f.v)
		if err != nil || !p.Addr().Is4() || p.Bits() < 8 {
			return fmt.Errorf("%s %q: want an IPv4 prefix of 8 to 32 bits (10.96.0.0/12)", f.name, f.v)
		}
		for _, pool := range []string{DefaultDevicePool, DefaultServicePool} {
			if p.Overlaps(netip.MustParsePrefix(pool)) {
				return fmt.Errorf("%s %s overlaps the VPN's pool %s", f.name, p, pool)
			}
		}
		ps = append(ps, p.Masked())
	}
	for _, f := range []struct{ name, v string }{{"cluster dns", c.DNSServer}, {"api vip", c.APIAddress}} {
		if f.v == "" {
			continue
		}
		a, err := netip.ParseAddr(f.v)
		if err != nil || !a.Is4() {
			return fmt.Errorf("%s %q: want an IPv4 address", f.name, f.v)
		}
		if !containsAddr(ps, a) {
			return fmt.Errorf("%s %s is in none of the declared prefixes", f.name, a)
		}
	}
	if c.Mapped != "" {
		p, err := netip.ParsePrefix(c.Mapped)
		if err != nil || !MappedPool.Contains(p.Addr()) || p.Bits() != 96 || p != p.Masked() {
			return fmt.Errorf("mapped range %q: want a /96 inside %s", c.Mapped, MappedPool)
		}
	}
	return nil
}

func containsAddr(ps []netip.Prefix, a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// MappedPool holds every mapped range: fd52:4f53:5600:<site>::/96 for a
// cluster (site ≥ 1, its VPN service's subnet index) and, at site 0, the
// IPv6 tunnel address of each device (DeviceAddr6), the source of what
// it sends to mapped ranges.
var MappedPool = netip.MustParsePrefix("fd52:4f53:5600::/48")

// MaxSite is the largest site a mapped range can have.
const MaxSite = 0xffff

// MappedRange is the cluster of site's mapped /96.
func MappedRange(site int) (netip.Prefix, error) {
	if site < 1 || site > MaxSite {
		return netip.Prefix{}, fmt.Errorf("site %d: want 1 to %d", site, MaxSite)
	}
	b := MappedPool.Addr().As16()
	b[6], b[7] = byte(site>>8), byte(site)
	return netip.PrefixFrom(netip.AddrFrom16(b), 96), nil
}

// MappedAddr is v4 inside the mapped range m (its last 32 bits).
func MappedAddr(m netip.Prefix, v4 netip.Addr) netip.Addr {
	b := m.Masked().Addr().As16()
	v := v4.Unmap().As4()
	copy(b[12:], v[:])
	return netip.AddrFrom16(b)
}

// MappedPrefix is the IPv4 prefix p inside the mapped range m.
func MappedPrefix(m netip.Prefix, p netip.Prefix) netip.Prefix {
	return netip.PrefixFrom(MappedAddr(m, p.Masked().Addr()), 96+p.Bits())
}

// ErrNotMapped is returned for an address outside a mapped range.
var ErrNotMapped = errors.New("not in the mapped range")

// Unmapped is the IPv4 address that a, inside the mapped range m, stands for.
func Unmapped(m netip.Prefix, a netip.Addr) (netip.Addr, error) {
	if m.Bits() != 96 || !a.Is6() || a.Is4In6() || !m.Contains(a) {
		return netip.Addr{}, fmt.Errorf("%s: %w %s", a, ErrNotMapped, m)
	}
	b := a.As16()
	return netip.AddrFrom4([4]byte(b[12:])), nil
}

// DeviceAddr6 is a device's IPv6 tunnel address, derived from its IPv4 one:
// site 0 of MappedPool. Both ends derive it; control allocates nothing.
func DeviceAddr6(v4 netip.Addr) netip.Addr {
	return MappedAddr(netip.PrefixFrom(MappedPool.Addr(), 96), v4)
}
