package menu

import (
	"net/netip"
	"strings"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/vpnd/localapi"
)

// privateNote is what a cluster row adds when its VPN server does not
// answer at a private ingress address: by the product docs' rule such an
// address is reachable only from the cluster's own network (a homelab), so
// away from it no firewall rule or relay helps. It says the same as runos
// vpn status and doctor; "" when it does not apply.
//
// Away is judged from the daemon's own view of this machine's addresses
// (Status.Network.Uplink, "…; addresses 10.77.0.101/24@lan0 …"): on the
// node's network the same silence is something else, and nothing is
// claimed; neither when the addresses are unknown.
func privateNote(uplink string, c localapi.ClusterStatus) string {
	if c.PeerUp {
		return ""
	}
	ep, err := netip.ParseAddrPort(c.Server.Endpoint)
	if err != nil || ep.Addr().Unmap().IsLoopback() || api.AddressKind(ep.Addr()) != api.AddressPrivate {
		return ""
	}
	local := uplinkPrefixes(uplink)
	if len(local) == 0 {
		return ""
	}
	for _, p := range local {
		if p.Contains(ep.Addr().Unmap()) {
			return ""
		}
	}
	return "private address " + ep.Addr().Unmap().String() + ": reachable only from its own network"
}

// privateTooltip says it whole, with what to do.
func privateTooltip(c localapi.ClusterStatus) string {
	return "No answer from " + c.Server.NodeID + " at " + c.Server.Endpoint + ": its ingress address is private, reachable only from the cluster's own network. " +
		"Connect from there, or give the node a reachable ingress address (runos nodes ingress)."
}

// uplinkPrefixes reads the addresses out of the daemon's uplink line.
func uplinkPrefixes(uplink string) []netip.Prefix {
	_, list, ok := strings.Cut(uplink, "; addresses ")
	if !ok {
		return nil
	}
	var ps []netip.Prefix
	for _, f := range strings.Fields(list) {
		addr, _, _ := strings.Cut(f, "@")
		if p, err := netip.ParsePrefix(addr); err == nil {
			ps = append(ps, p)
		}
	}
	return ps
}
