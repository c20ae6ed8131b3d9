// Package policyfilter enforces an account's access policy on a gateway:
// every packet a device sends through the tunnel is checked against its
// user's rules for the cluster (control/policy's DeviceFilters, compiled on
// each map) before it reaches the node, so a policy change cuts live
// connections, not only new ones. The filter sits between wireguard-go and
// the TUN (a tun.Device wrapper, as the daemon's MSS clamp does), reads
// only IP headers, and keeps no state per flow.
//
// It is not the forwarding into the cluster (gateway/reach) nor the
// policy's evaluation (control/policy); it only decides, per packet, with
// tables swapped in atomically, and counts what it refused, per rule
// (rules.go).
package policyfilter

import (
	"encoding/binary"
	"net/netip"
	"sync"
	"sync/atomic"

	"golang.zx2c4.com/wireguard/tun"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/policy"
)

// Filter is the gateway's per-device packet filter. The zero Filter lets
// everything through (no policy yet); safe for concurrent use.
type Filter struct {
	cur atomic.Pointer[tables]
	// Dropped, when set, is told of each refused packet (for metrics).
	Dropped func()

	mu      sync.Mutex                 // rules, inForce: taken by Set and RuleDrops, never per packet
	rules   map[ruleKey]*atomic.Uint64 // refusals per rule (rules.go); their sum is every refusal
	inForce map[ruleKey]bool           // the rules of the tables last set
}

// tables is one map's filters: immutable once set.
type tables struct {
	devices *policy.DeviceFilters // nil: no policy, everything passes
	service netip.Addr            // the VPN server's address: its DNS and ICMP always pass
	mapped  netip.Prefix          // the cluster's mapped /96 (invalid: none)
	// byLine are the refusal counters of the policy's allow rules by
	// line, [0] the default deny's: made by Set, so that a refusal costs
	// an atomic add and nothing else.
	byLine []*atomic.Uint64
}

// deviceSite is where devices' IPv6 tunnel addresses are (api.DeviceAddr6).
var deviceSite = netip.PrefixFrom(api.MappedPool.Addr(), 96)

// Set swaps in the filters of a new map: devices nil when the account has
// no policy. service is the cluster's VPN address, whose DNS (port 53) and
// ICMP every device may always use, whatever the rules say: names must
// resolve and the server must answer a ping for the daemon to say why a
// destination is refused rather than that the VPN is down. mapped is the
// cluster's mapped IPv6 range (gateway/reach): a packet there is checked
// as the IPv4 address it stands for, since rules name the cluster's own
// addresses, and a device's IPv6 tunnel address as its IPv4 one.
func (f *Filter) Set(devices *policy.DeviceFilters, service netip.Addr, mapped netip.Prefix) {
	t := &tables{devices: devices, service: service.Unmap(), mapped: mapped}
	if devices != nil {
		t.byLine = f.counters(devices.Rules())
	}
	f.cur.Store(t)
}

// DroppedPackets is how many packets were refused since the start: the
// sum of the counters per rule, each refusal counted once, against one.
func (f *Filter) DroppedPackets() uint64 {
	var n uint64
	for _, r := range f.RuleDrops() {
		n += r.Packets
	}
	return n
}

// Allow reports whether the IP packet pkt, received from a device, may go
// on into the node.
func (f *Filter) Allow(pkt []byte) bool {
	allow, _ := verdict(f.cur.Load(), pkt)
	return allow
}

// verdict is Allow on tables t, with the line of the rule a refusal is
// counted against (0: the default deny; policy.Filter.Verdict).
func verdict(t *tables, pkt []byte) (bool, int) {
	if t == nil || t.devices == nil {
		return true, 0
	}
	src, k, ok := parse(pkt)
	if !ok {
		return false, 0
	}
	if v4, ok := unmap(deviceSite, src); ok {
		src = v4
	}
	if v4, ok := unmap(t.mapped, k.Addr); ok {
		k.Addr = v4
	}
	if k.Addr == t.service && (k.Proto == policy.ICMP || k.Port == 53 && (k.Proto == policy.UDP || k.Proto == policy.TCP)) {
		return true, 0
	}
	return t.devices.Verdict(src, k)
}

// unmap is the IPv4 address a stands for when it is inside the mapped
// range m (invalid: none). It asks api.Unmapped only then: for every
// other address, most packets, api.Unmapped formats an error, which cost
// the gateway a sixth of its CPU under iperf3 (docs/performance.md, issue
// 23); a packet's check allocates nothing.
func unmap(m netip.Prefix, a netip.Addr) (netip.Addr, bool) {
	if !m.IsValid() || !a.Is6() || a.Is4In6() || !m.Contains(a) {
		return netip.Addr{}, false
	}
	v4, err := api.Unmapped(m, a)
	return v4, err == nil
}

// parse reads a packet's source and what it asks for: destination,
// protocol and destination port (0 for other protocols, and for an IPv4
// fragment after the first, which carries no port: it passes only a rule
// for every port). ok is false for what is not an IP packet.
func parse(pkt []byte) (src netip.Addr, k policy.Packet, ok bool) {
	if len(pkt) < 1 {
		return src, k, false
	}
	var l4 []byte
	var proto uint8
	switch pkt[0] >> 4 {
	case 4:
		ihl := int(pkt[0]&0x0f) * 4
		if len(pkt) < 20 || ihl < 20 || len(pkt) < ihl {
			return src, k, false
		}
		proto = pkt[9]
		src = netip.AddrFrom4([4]byte(pkt[12:16]))
		k.Addr = netip.AddrFrom4([4]byte(pkt[16:20]))
		if binary.BigEndian.Uint16(pkt[6:8])&0x1fff == 0 {
			l4 = pkt[ihl:]
		}
	case 6:
		if len(pkt) < 40 {
			return src, k, false
		}
		proto = pkt[6]
		src = netip.AddrFrom16([16]byte(pkt[8:24]))
		k.Addr = netip.AddrFrom16([16]byte(pkt[24:40]))
		l4 = pkt[40:]
	default:
		return src, k, false
	}
	k.Proto = policy.ProtoOf(proto)
	if (k.Proto == policy.TCP || k.Proto == policy.UDP) && len(l4) >= 4 {
		k.Port = binary.BigEndian.Uint16(l4[2:4])
	}
	return src, k, true
}

// Wrap is the TUN as wireguard-go sees it with the filter in its write
// path: what wireguard-go writes is what devices sent.
func (f *Filter) Wrap(dev tun.Device) tun.Device { return &filterTUN{Device: dev, f: f} }

type filterTUN struct {
	tun.Device
	f *Filter
}

// Write passes on the packets the filter allows. Refused ones are dropped
// silently (TCP sees a loss and gives up, as behind any firewall) and
// counted; the batch's count is all of it, as wireguard-go expects.
func (t *filterTUN) Write(bufs [][]byte, offset int) (int, error) {
	c := t.f.cur.Load() // one table for the batch
	if c == nil || c.devices == nil {
		return t.Device.Write(bufs, offset)
	}
	var kept [][]byte // nil until a packet is dropped; then the packets kept
	for i, b := range bufs {
		allow, line := verdict(c, b[offset:])
		if allow {
			if kept != nil {
				kept = append(kept, b)
			}
			continue
		}
		c.refused(line)
		if t.f.Dropped != nil {
			t.f.Dropped()
		}
		if kept == nil {
			kept = append(make([][]byte, 0, len(bufs)), bufs[:i]...)
		}
	}
	if kept == nil {
		return t.Device.Write(bufs, offset)
	}
	if len(kept) == 0 {
		return len(bufs), nil
	}
	if _, err := t.Device.Write(kept, offset); err != nil {
		return 0, err
	}
	return len(bufs), nil
}
