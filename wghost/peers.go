package wghost

import (
	"net"
	"net/netip"
	"slices"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// Peer is a peer as an end wants it on its host.
type Peer struct {
	PublicKey wgtypes.Key
	// Endpoint is where to send before the peer has sent anything; the
	// zero value sets none (a node learns each device's address from its
	// packets, and keeps it as the device roams).
	Endpoint   netip.AddrPort
	AllowedIPs []netip.Prefix
	Keepalive  time.Duration // persistent keepalive; 0: none
}

// Config is the UAPI change that adds p, or sets it whole when it exists:
// its allowed IPs replaced, its endpoint (when given) and keepalive set.
func (p Peer) Config() wgtypes.PeerConfig {
	ka := p.Keepalive
	pc := wgtypes.PeerConfig{
		PublicKey:                   p.PublicKey,
		ReplaceAllowedIPs:           true,
		AllowedIPs:                  ipNets(p.AllowedIPs),
		PersistentKeepaliveInterval: &ka,
	}
	if p.Endpoint.IsValid() {
		pc.Endpoint = net.UDPAddrFromAddrPort(p.Endpoint)
	}
	return pc
}

// Recreate is the UAPI change that removes p and adds it again in one
// transaction (so it is never missing): a fresh peer sends its first
// handshake initiation at once, where an existing one would wait for
// wireguard-go's timers.
func Recreate(p Peer) []wgtypes.PeerConfig {
	return []wgtypes.PeerConfig{{PublicKey: p.PublicKey, Remove: true}, p.Config()}
}

// Diff is the per-peer difference between the peers a host has and the
// ones wanted, as UAPI changes for one transaction: removals first, then
// additions, then changes to peers that stay (UpdateOnly, so a peer removed
// meanwhile is not brought back). A peer whose allowed IPs, endpoint (when
// one is wanted) and keepalive already match is not touched, so its
// session is never reset.
func Diff(have, want []Peer) []wgtypes.PeerConfig {
	haveBy := make(map[wgtypes.Key]Peer, len(have))
	for _, p := range have {
		haveBy[p.PublicKey] = p
	}
	wanted := make(map[wgtypes.Key]bool, len(want))
	for _, p := range want {
		wanted[p.PublicKey] = true
	}
	var out []wgtypes.PeerConfig
	for _, h := range have {
		if !wanted[h.PublicKey] {
			out = append(out, wgtypes.PeerConfig{PublicKey: h.PublicKey, Remove: true})
		}
	}
	var updates []wgtypes.PeerConfig
	for _, p := range want {
		h, ok := haveBy[p.PublicKey]
		switch {
		case !ok:
			out = append(out, p.Config())
		case !same(h, p):
			pc := p.Config()
			pc.UpdateOnly = true
			updates = append(updates, pc)
		}
	}
	return append(out, updates...)
}

// same reports whether have already is what want asks.
func same(have, want Peer) bool {
	if want.Endpoint.IsValid() && want.Endpoint != have.Endpoint {
		return false
	}
	return have.Keepalive == want.Keepalive && slices.Equal(prefixSet(have.AllowedIPs), prefixSet(want.AllowedIPs))
}

// prefixSet is ps masked, sorted and without repeats: allowed IPs as the
// device keeps them.
func prefixSet(ps []netip.Prefix) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.Masked())
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	return slices.Compact(out)
}

// PeersOf is the device's peers as Diff takes them.
func PeersOf(d *wgtypes.Device) []Peer {
	out := make([]Peer, 0, len(d.Peers))
	for _, p := range d.Peers {
		out = append(out, PeerOf(p))
	}
	return out
}

// PeerOf is one of the device's peers as Diff takes it.
func PeerOf(p wgtypes.Peer) Peer {
	out := Peer{PublicKey: p.PublicKey, Keepalive: p.PersistentKeepaliveInterval}
	if p.Endpoint != nil {
		ap := p.Endpoint.AddrPort()
		out.Endpoint = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	for _, n := range p.AllowedIPs {
		if pr, ok := prefixOf(n); ok {
			out.AllowedIPs = append(out.AllowedIPs, pr)
		}
	}
	return out
}

func prefixOf(n net.IPNet) (netip.Prefix, bool) {
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ones, bits := n.Mask.Size()
	if a.Is4In6() {
		a = a.Unmap()
		if bits == 128 {
			ones -= 96
		}
	}
	return netip.PrefixFrom(a, ones), true
}

// HostPrefix is a as the one address of a peer: /32 or /128.
func HostPrefix(a netip.Addr) netip.Prefix {
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen())
}

func ipNets(ps []netip.Prefix) []net.IPNet {
	out := make([]net.IPNet, len(ps))
	for i, p := range ps {
		out[i] = net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
	}
	return out
}
