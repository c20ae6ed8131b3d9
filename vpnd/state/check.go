package state

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/vpnd/wgcfg"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// cluster is one joined cluster of the map, checked: a config control sent
// is used only when every field parses and it collides with no other.
type cluster struct {
	cc     api.ClusterConfig
	peer   wgcfg.Peer
	dns    netip.Addr // invalid when the cluster has no DNS server
	server netip.Addr
	err    error // unusable config: the cluster shows state error
	// domains are the DNS domains the trust accepts; refused says which
	// others control sent, and why (shown, and logged, not used).
	domains []string
	refused []string
}

// joined returns the map's clusters by cid, checked against the syntax and
// against the daemon's trust. Collisions (the same server key or
// overlapping subnets, which one WireGuard device cannot serve) go to the
// cluster whose cid sorts first; the other shows why.
func joined(m *api.DeviceMap, t Trust) map[string]*cluster {
	out := map[string]*cluster{}
	if m == nil {
		return out
	}
	var cids []string
	for _, cc := range m.Clusters {
		if _, dup := out[cc.CID]; dup || api.CheckCID(cc.CID) != nil {
			continue
		}
		c := &cluster{cc: cc}
		c.err = c.parse(t)
		out[cc.CID] = c
		cids = append(cids, cc.CID)
	}
	slices.Sort(cids)
	for i, a := range cids {
		ca := out[a]
		if ca.err != nil || !ca.cc.VPN.Ready {
			continue
		}
		for _, b := range cids[i+1:] {
			cb := out[b]
			if cb.err != nil || !cb.cc.VPN.Ready {
				continue
			}
			switch {
			case cb.peer.PublicKey == ca.peer.PublicKey:
				cb.err = fmt.Errorf("control gave %s the same server key as %s; not configured", b, a)
			case cb.peer.AllowedIPs[0].Overlaps(ca.peer.AllowedIPs[0]):
				cb.err = fmt.Errorf("subnet %s of %s overlaps %s of %s; not configured",
					cb.peer.AllowedIPs[0], b, ca.peer.AllowedIPs[0], a)
			}
		}
	}
	return out
}

func (c *cluster) parse(t Trust) error {
	v := c.cc.VPN
	c.peer.CID = c.cc.CID
	if !v.Ready {
		return nil // nothing to configure yet; fields may be empty
	}
	k, err := wgtypes.ParseKey(v.PublicKey)
	if err != nil {
		return fmt.Errorf("control sent a bad server key for %s: %v", c.cc.CID, err)
	}
	c.peer.PublicKey = k
	ep, err := netip.ParseAddrPort(v.Endpoint)
	if err != nil || ep.Port() == 0 || !ep.Addr().IsValid() || ep.Addr().IsUnspecified() {
		return fmt.Errorf("control sent a bad endpoint %q for %s: want ip:port", v.Endpoint, c.cc.CID)
	}
	c.peer.Endpoint = netip.AddrPortFrom(ep.Addr().Unmap(), ep.Port())
	sn, err := netip.ParsePrefix(v.Subnet)
	if err != nil || sn != sn.Masked() || sn.Bits() == 0 {
		return fmt.Errorf("control sent a bad subnet %q for %s", v.Subnet, c.cc.CID)
	}
	if err := t.checkRoute(sn); err != nil {
		return refusal{fmt.Errorf("control sent subnet %s for %s: %v: refused", sn, c.cc.CID, err)}
	}
	c.peer.AllowedIPs = []netip.Prefix{sn}
	relay, err := relayURL(v.Relay, c.peer.Endpoint.Addr())
	if err != nil {
		// The relay is a fallback: the cluster stays on UDP, and says why.
		c.refused = append(c.refused, fmt.Sprintf("control sent a relay %v; not used", err))
	}
	c.peer.Relay = relay
	if v.Address != "" {
		a, err := netip.ParseAddr(v.Address)
		if err != nil || !sn.Contains(a) {
			return fmt.Errorf("control sent a server address %q outside %s for %s", v.Address, sn, c.cc.CID)
		}
		c.server = a
	}
	if v.DNS != "" {
		a, err := netip.ParseAddr(v.DNS)
		if err != nil || !sn.Contains(a) {
			// The DNS server must be reached through this cluster's peer.
			return fmt.Errorf("control sent a DNS server %q outside %s for %s", v.DNS, sn, c.cc.CID)
		}
		c.dns = a
	}
	for _, d := range v.Domains {
		if err := checkDomain(d); err != nil {
			return fmt.Errorf("control sent a %v for %s", err, c.cc.CID)
		}
	}
	own, ownErr := ownDomain(c.cc)
	for _, d := range v.Domains {
		if err := t.checkDomain(own, d); err != nil {
			if ownErr != nil {
				err = ownErr
			}
			c.refused = append(c.refused, fmt.Sprintf("control sent %v: not used", err))
			continue
		}
		c.domains = append(c.domains, d)
	}
	return nil
}

// Refusals lists what the trust refused in m, one line per refusal, for
// the daemon's log.
func Refusals(m *api.DeviceMap, t Trust) []string {
	var out []string
	if _, err := deviceAddress(m, t); err != nil {
		out = append(out, err.Error())
	}
	cs := joined(m, t)
	cids := make([]string, 0, len(cs))
	for cid := range cs {
		cids = append(cids, cid)
	}
	slices.Sort(cids)
	for _, cid := range cids {
		c := cs[cid]
		if errors.As(c.err, new(refusal)) {
			out = append(out, c.err.Error())
		}
		for _, r := range c.refused {
			out = append(out, cid+": "+r)
		}
	}
	return out
}

// refusal is a well-formed value of control's that the trust refused.
type refusal struct{ error }

// deviceAddress is the device's tunnel address as a host prefix, if the
// trust accepts it.
func deviceAddress(m *api.DeviceMap, t Trust) (netip.Prefix, error) {
	if m == nil || m.Device.Address == "" {
		return netip.Prefix{}, nil
	}
	a, err := netip.ParseAddr(m.Device.Address)
	if err != nil || a.IsUnspecified() {
		return netip.Prefix{}, fmt.Errorf("control gave the device an unusable tunnel address %q", m.Device.Address)
	}
	a = a.Unmap()
	p := netip.PrefixFrom(a, a.BitLen())
	if err := t.checkRoute(p); err != nil {
		return netip.Prefix{}, refusal{fmt.Errorf("control gave the device the tunnel address %s: %v: refused", a, err)}
	}
	return p, nil
}

// checkDomain accepts a plain DNS name (letters, digits, '-' and '_' in
// labels of 1 to 63, at most 253 in all). Domains go into resolver settings,
// so anything else from control is refused rather than written there.
func checkDomain(d string) error {
	if d == "" || len(d) > 253 {
		return fmt.Errorf("bad domain %q", d)
	}
	label := 0
	for i := 0; i < len(d); i++ {
		ch := d[i]
		switch {
		case ch == '.':
			if label == 0 {
				return fmt.Errorf("bad domain %q", d)
			}
			label = 0
			continue
		case ch >= 'a' && ch <= 'z', ch >= 'A' && ch <= 'Z', ch >= '0' && ch <= '9', ch == '-', ch == '_':
		default:
			return fmt.Errorf("bad domain %q", d)
		}
		label++
		if label > 63 {
			return fmt.Errorf("bad domain %q", d)
		}
	}
	if label == 0 {
		return fmt.Errorf("bad domain %q", d)
	}
	return nil
}

// relayURL is control's relay URL if it is one the daemon may dial
// (api.ParseRelayURL) on the VPN node at node: its host is that address,
// or a name (the dial checks it resolves there). Else "" and why: the
// device would hand another host its relay ticket and the cluster's
// traffic.
func relayURL(s string, node netip.Addr) (string, error) {
	if s == "" {
		return "", nil
	}
	u, err := api.ParseRelayURL(s)
	if err != nil {
		return "", err
	}
	if _, err := api.RelayHostIs(u, node); err != nil {
		return "", err
	}
	return s, nil
}
