package tunnel

import (
	"encoding/binary"
	"net/netip"
	"slices"
	"sync/atomic"

	"golang.zx2c4.com/wireguard/tun"
)

// outerOverhead is what WireGuard adds to an inner packet on the wire in the
// worst case: an IPv6 header (40), UDP (8) and WireGuard's own (32).
const outerOverhead = 80

// clampTUN is the tunnel's TUN device as wireguard-go sees it, lowering the
// MSS of TCP SYNs in both directions to what fits the laptop's uplink once
// WireGuard has wrapped it. With wg1 at 1420 and a 1500-byte uplink it does
// nothing; over a 1280-byte uplink (a tunnel over a tunnel, a PPPoE line)
// the full-size segments a server would send are too large for the path,
// and where nothing answers with ICMP (a bridge, many middleboxes) they
// vanish: connections stall after their handshake. Clamping the MSS keeps
// TCP below that size from the first segment.
type clampTUN struct {
	tun.Device
	mss4 atomic.Int32 // the MSS an IPv4 SYN may carry; 0: no clamping
}

// setUplinkMTU sets the clamp for an uplink of that MTU; it returns the
// IPv4 MSS now clamped to (0: none needed).
func (c *clampTUN) setUplinkMTU(uplink, tunMTU int) int {
	mss := uplink - outerOverhead - 40
	if uplink <= 0 || mss >= tunMTU-40 {
		mss = 0
	}
	if mss < 0 {
		mss = 536 // RFC 879's default: never clamp below what every host takes
	}
	c.mss4.Store(int32(mss))
	return mss
}

// SetUplinkMTU sets the MTU the clamp falls back on where the path to a
// VPN server cannot be looked up (0: unknown): the daemon passes the
// network monitor's guess when the default route or the addresses change.
// The clamp itself follows the paths to the peers' endpoints (reclamp).
func (e *Engine) SetUplinkMTU(mtu int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.uplinkMTU = mtu
	e.reclamp(true)
}

// reclamp sets the clamp for the smallest MTU on the way to any peer's
// endpoint: the interface (or route MTU) each one's datagrams leave by, as
// the OS's routing table says (Options.RouteMTU), or the uplink MTU where
// it cannot say. Only those paths count: another VPN's interface or a
// container bridge with a smaller MTU carries none of the tunnel's
// datagrams and must not shrink every TCP segment through it (with
// another WireGuard interface up, 1420, the clamp was 1300: 80 bytes less
// in every segment, ~4 % of the lab benchmark's throughput). Unless
// force, it looks again only when the endpoints changed. e.mu held.
func (e *Engine) reclamp(force bool) {
	if e.clamp == nil {
		return // no TUN yet (New failed before it)
	}
	var eps []netip.Addr
	for _, p := range e.applied.Peers {
		if p.Endpoint.IsValid() {
			eps = append(eps, p.Endpoint.Addr())
		}
	}
	slices.SortFunc(eps, netip.Addr.Compare)
	eps = slices.Compact(eps)
	if !force && slices.Equal(eps, e.clampedFor) {
		return
	}
	e.clampedFor = eps
	mtu, via := pathMTU(eps, e.routeMTU, e.uplinkMTU)
	was := int(e.clamp.mss4.Load())
	mss := e.clamp.setUplinkMTU(mtu, e.mtu)
	if mss != was {
		if mss > 0 {
			e.log.Info("uplink MTU below the tunnel's: clamping TCP MSS", "interface", e.name, "uplinkMTU", mtu, "via", via, "tunnelMTU", e.mtu, "mss", mss)
		} else {
			e.log.Info("uplink MTU fits the tunnel's: TCP MSS no longer clamped", "interface", e.name, "uplinkMTU", mtu, "via", via, "tunnelMTU", e.mtu)
		}
	}
	e.pathMTU = mtu
}

// pathMTU is the smallest MTU on the way to eps (route looks one up; nil
// or an error: fallback for that one), with what decided it for the log;
// with no endpoints, fallback.
func pathMTU(eps []netip.Addr, route func(netip.Addr) (int, error), fallback int) (int, string) {
	if len(eps) == 0 {
		return fallback, "the uplinks (no endpoint yet)"
	}
	m, via := 0, ""
	for _, ep := range eps {
		v, why := fallback, "the uplinks (route to "+ep.String()+" unknown)"
		if route != nil {
			if r, err := route(ep); err == nil && r > 0 {
				v, why = r, "the route to "+ep.String()
			}
		}
		if v > 0 && (m == 0 || v < m) {
			m, via = v, why
		}
	}
	return m, via
}

func (c *clampTUN) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	n, err := c.Device.Read(bufs, sizes, offset)
	if m := int(c.mss4.Load()); m > 0 {
		for i := 0; i < n; i++ {
			clampMSS(bufs[i][offset:offset+sizes[i]], m)
		}
	}
	return n, err
}

func (c *clampTUN) Write(bufs [][]byte, offset int) (int, error) {
	if m := int(c.mss4.Load()); m > 0 {
		for _, b := range bufs {
			clampMSS(b[offset:], m)
		}
	}
	return c.Device.Write(bufs, offset)
}

// clampMSS lowers the MSS option of a TCP SYN (or SYN-ACK) in the IP packet
// pkt to mss4 (IPv4) or mss4-20 (IPv6), fixing the TCP checksum in place
// (RFC 1624). It reports whether it changed pkt; anything else (not TCP, not
// a SYN, no MSS option, a smaller MSS, a malformed packet) is left alone.
func clampMSS(pkt []byte, mss4 int) bool {
	if len(pkt) == 0 {
		return false
	}
	var tcp []byte
	limit := mss4
	switch pkt[0] >> 4 {
	case 4:
		if len(pkt) < 20 {
			return false
		}
		ihl := int(pkt[0]&0x0f) * 4
		if ihl < 20 || pkt[9] != 6 || binary.BigEndian.Uint16(pkt[6:8])&0x1fff != 0 {
			return false // not TCP, or not a packet's first fragment
		}
		if tot := int(binary.BigEndian.Uint16(pkt[2:4])); tot <= len(pkt) {
			pkt = pkt[:tot]
		}
		if len(pkt) < ihl+20 {
			return false
		}
		tcp = pkt[ihl:]
	case 6:
		if len(pkt) < 60 || pkt[6] != 6 {
			return false // not TCP right after the header (extension headers: left alone)
		}
		tcp, limit = pkt[40:], mss4-20
	default:
		return false
	}
	if tcp[13]&0x02 == 0 {
		return false // not a SYN
	}
	doff := int(tcp[12]>>4) * 4
	if doff < 20 || len(tcp) < doff {
		return false
	}
	for i := 20; i < doff; {
		switch tcp[i] {
		case 0: // end of options
			return false
		case 1: // no-op
			i++
			continue
		}
		if i+1 >= doff {
			return false
		}
		l := int(tcp[i+1])
		if l < 2 || i+l > doff {
			return false
		}
		if tcp[i] == 2 && l == 4 {
			at := i + 2
			old := binary.BigEndian.Uint16(tcp[at:])
			if int(old) <= limit {
				return false
			}
			binary.BigEndian.PutUint16(tcp[at:], uint16(limit))
			o, n := old, uint16(limit)
			if at%2 == 1 { // the checksum sums 16-bit words from the header's start
				o, n = o<<8|o>>8, n<<8|n>>8
			}
			fixChecksum(tcp[16:18], o, n)
			return true
		}
		i += l
	}
	return false
}

// fixChecksum updates a one's-complement checksum for a 16-bit word
// changing from old to new: HC' = ~(~HC + ~m + m') (RFC 1624, eqn. 3).
func fixChecksum(field []byte, old, new uint16) {
	sum := uint32(^binary.BigEndian.Uint16(field)) + uint32(^old) + uint32(new)
	sum = sum&0xffff + sum>>16
	sum = sum&0xffff + sum>>16
	binary.BigEndian.PutUint16(field, ^uint16(sum))
}
