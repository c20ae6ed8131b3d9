// Package pool maps indexes to addresses in control's two IPv4 pools: the
// device pool (one address per device) and the service pool (one /24 per
// cluster's VPN service). The store keeps the indexes; allocation picks the
// lowest free one.
package pool

import (
	"fmt"
	"net/netip"
)

// Devices is the device pool.
type Devices struct{ p netip.Prefix }

// NewDevices checks that p is an IPv4 prefix with room for devices.
func NewDevices(p netip.Prefix) (Devices, error) {
	p = p.Masked()
	if !p.Addr().Is4() || p.Bits() > 30 {
		return Devices{}, fmt.Errorf("device pool %s: want an IPv4 prefix of /30 or larger, e.g. 100.96.0.0/16", p)
	}
	return Devices{p}, nil
}

// Prefix is the pool itself.
func (d Devices) Prefix() netip.Prefix { return d.p }

// Range is the indexes handed out: from 2 (the network address and the
// first host stay free) to the last before the broadcast address.
func (d Devices) Range() (lo, hi int) { return 2, 1<<(32-d.p.Bits()) - 2 }

// Addr is the address at index i.
func (d Devices) Addr(i int) netip.Addr { return offset(d.p.Addr(), uint32(i)) }

// Services is the service pool.
type Services struct{ p netip.Prefix }

// NewServices checks that p is an IPv4 prefix holding at least two /24s.
func NewServices(p netip.Prefix) (Services, error) {
	p = p.Masked()
	if !p.Addr().Is4() || p.Bits() > 23 {
		return Services{}, fmt.Errorf("service pool %s: want an IPv4 prefix of /23 or larger, e.g. 100.100.0.0/16", p)
	}
	return Services{p}, nil
}

// Prefix is the pool itself.
func (s Services) Prefix() netip.Prefix { return s.p }

// Range is the /24 indexes handed out: the first /24 stays free, so the
// first cluster's subnet is 100.100.1.0/24 in the default pool.
func (s Services) Range() (lo, hi int) { return 1, 1<<(24-s.p.Bits()) - 1 }

// Subnet is the /24 at index i.
func (s Services) Subnet(i int) netip.Prefix {
	return netip.PrefixFrom(offset(s.p.Addr(), uint32(i)<<8), 24)
}

// Overlaps reports whether the two pools share addresses.
func Overlaps(d Devices, s Services) bool { return d.p.Overlaps(s.p) }

func offset(a netip.Addr, n uint32) netip.Addr {
	b := a.As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v += n
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}
