package gateway

import (
	"fmt"
	"net/netip"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/gateway/clusterdns"
	"github.com/runos/vpn/gateway/reach"
	"github.com/runos/vpn/gateway/wgserver"
	"github.com/runos/vpn/policy"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// plan is what one GatewayMap asks of this node, checked and parsed. A nil
// plan means serve nothing.
type plan struct {
	serviceID string
	cid       string
	role      string
	moveID    string
	wg        wgserver.Spec
	zone      *clusterdns.Zone       // the cluster DNS: Domains answered with the server address
	reach     reach.Spec             // forwarding into the cluster (Interface set by the agent)
	filters   *policy.DeviceFilters  // the access policy per device address; nil: no policy
	policyErr error                  // the map's policy did not parse: filters refuse everything
	peerIDs   map[wgtypes.Key]string // device ids, for log lines
}

// planFor checks what the map asks for. Anything malformed is an error
// naming the field, and the caller then changes nothing.
func planFor(m *api.GatewayMap) (*plan, error) {
	s := m.Serve
	if s == nil {
		return nil, nil
	}
	fail := func(format string, args ...any) (*plan, error) {
		return nil, fmt.Errorf("map version %d: serve %s (service %s): %s", m.Version, s.CID, s.ServiceID, fmt.Sprintf(format, args...))
	}
	switch s.Role {
	case api.GatewayActive, api.GatewayStandby, api.GatewayDraining:
	default:
		return fail("unknown role %q (want active, standby or draining)", s.Role)
	}
	if s.Port < 1 || s.Port > 65535 {
		return fail("port %d is not a UDP port", s.Port)
	}
	subnet, err := netip.ParsePrefix(s.Subnet)
	if err != nil {
		return fail("subnet %q: %v", s.Subnet, err)
	}
	subnet = subnet.Masked()
	addr, err := netip.ParseAddr(s.Address)
	if err != nil {
		return fail("server address %q: %v", s.Address, err)
	}
	if addr = addr.Unmap(); !subnet.Contains(addr) {
		return fail("server address %s is outside the subnet %s", addr, subnet)
	}
	pool, err := netip.ParsePrefix(s.DevicePool)
	if err != nil {
		return fail("device pool %q: %v", s.DevicePool, err)
	}
	pool = pool.Masked()
	if pool.Overlaps(subnet) {
		return fail("device pool %s overlaps the subnet %s", pool, subnet)
	}
	p := &plan{
		serviceID: s.ServiceID,
		cid:       s.CID,
		role:      s.Role,
		moveID:    s.MoveID,
		peerIDs:   make(map[wgtypes.Key]string, len(s.Peers)),
		wg: wgserver.Spec{
			Port:       s.Port,
			Address:    netip.PrefixFrom(addr, subnet.Bits()),
			DevicePool: pool,
			Peers:      make([]wgserver.Peer, 0, len(s.Peers)),
		},
	}
	if p.zone, err = clusterdns.NewZone(addr, s.Domains); err != nil {
		return fail("%v", err)
	}
	if p.reach, err = reach.SpecFor("", addr, pool, s.Inside); err != nil {
		return fail("%v", err)
	}
	if in := s.Inside; in != nil && in.DNSServer != "" && p.reach.Mapped.IsValid() && len(s.Domains) > 0 {
		zi := clusterdns.Inside{Domain: s.Domains[0], Mapped: p.reach.Mapped,
			KubeDNS: netip.AddrPortFrom(netip.MustParseAddr(in.DNSServer), 53)}
		if in.APIAddress != "" {
			zi.VIP = netip.MustParseAddr(in.APIAddress)
		}
		if p.zone, err = p.zone.WithInside(zi); err != nil {
			return fail("%v", err)
		}
	}
	var pol *policy.Policy
	if s.Policy != "" {
		if pol, err = policy.Parse([]byte(s.Policy)); err != nil {
			// Closed, not frozen: every device's packets are refused, and
			// the peers still follow the map (a revocation or a session's
			// end must not wait for a gateway that reads the policy).
			p.policyErr = fmt.Errorf("access policy: %w: every device's packets are refused until control sends one this gateway reads", err)
			pol = &policy.Policy{}
		}
	}
	devices := make([]policy.Device, 0, len(s.Peers))
	addrs := map[netip.Addr]string{}
	for _, gp := range s.Peers {
		k, err := wgtypes.ParseKey(gp.PublicKey)
		if err != nil {
			return fail("peer %s: public key %q is not a WireGuard key", gp.DeviceID, gp.PublicKey)
		}
		if _, dup := p.peerIDs[k]; dup {
			return fail("peer %s: public key %s listed twice", gp.DeviceID, k)
		}
		a, err := netip.ParseAddr(gp.Address)
		if err != nil {
			return fail("peer %s: address %q: %v", gp.DeviceID, gp.Address, err)
		}
		if a = a.Unmap(); !pool.Contains(a) {
			return fail("peer %s: address %s is outside the device pool %s", gp.DeviceID, a, pool)
		}
		if other, dup := addrs[a]; dup {
			return fail("peers %s and %s share the address %s", other, gp.DeviceID, a)
		}
		addrs[a] = gp.DeviceID
		p.peerIDs[k] = gp.DeviceID
		p.wg.Peers = append(p.wg.Peers, wgserver.Peer{DeviceID: gp.DeviceID, PublicKey: k, Address: a})
		devices = append(devices, policy.Device{Addr: a, User: policy.Subject{User: gp.User, Groups: gp.Groups}})
	}
	if pol != nil {
		p.filters = policy.CompileDevices(pol, s.CID, devices)
	}
	return p, nil
}

// samePeers reports whether two plans serve the same peers with the same
// addresses (order does not matter).
func samePeers(a, b *plan) bool {
	if a == nil || b == nil {
		return a == b
	}
	return len(a.wg.Peers) == len(b.wg.Peers) && servesAll(b, a)
}

// addsPeers reports whether next serves what prev served, on the same
// port in the same role, with peers added and none removed or readdressed.
func addsPeers(prev, next *plan) bool {
	return prev != nil && next != nil && prev.role == next.role && prev.wg.Port == next.wg.Port && servesAll(next, prev)
}

// onlyPeersChange reports whether going from prev to next changes nothing
// of the server but peers added (addsPeers) on an interface whose address
// and device pool stay as prev set them: the server's ApplyPeers then does
// all of it. (The forwarding into the cluster is applied as for any map:
// reach.Forwarder installs nothing when its rules are the same.)
func onlyPeersChange(prev, next *plan) bool {
	return addsPeers(prev, next) && prev.wg.Address == next.wg.Address && prev.wg.DevicePool == next.wg.DevicePool
}

// servesAll reports whether p serves every peer of q at q's address.
func servesAll(p, q *plan) bool {
	if len(p.wg.Peers) < len(q.wg.Peers) {
		return false
	}
	addr := make(map[wgtypes.Key]netip.Addr, len(p.wg.Peers))
	for _, pr := range p.wg.Peers {
		addr[pr.PublicKey] = pr.Address
	}
	for _, pr := range q.wg.Peers {
		if got, ok := addr[pr.PublicKey]; !ok || got != pr.Address {
			return false
		}
	}
	return true
}

// peerKeys is the set of the plan's peers' keys.
func peerKeys(p *plan) map[wgtypes.Key]bool {
	out := make(map[wgtypes.Key]bool, len(p.wg.Peers))
	for _, peer := range p.wg.Peers {
		out[peer.PublicKey] = true
	}
	return out
}
