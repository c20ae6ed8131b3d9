package cli

import (
	"fmt"
	"net/netip"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/vpnd/localapi"
)

// The product docs' rule: a node's private ingress address is for "a
// cluster reached only from your own network (a homelab)": it is
// reachable from that network and nowhere else. Away from it (the laptop
// on a phone's hotspot), no firewall rule brings UDP through, and the
// relay, on the same private address, does not answer either: status and
// doctor say so instead of blaming the firewall.

// awayFromPrivate says whether c's VPN server has a private ingress
// address on a network this machine is not on (no local address's prefix
// holds it). Unknown local addresses count as on it: nothing is claimed.
func awayFromPrivate(c localapi.ClusterStatus, local []netip.Prefix) bool {
	ep, err := netip.ParseAddrPort(c.Server.Endpoint)
	if err != nil || api.AddressKind(ep.Addr()) != api.AddressPrivate || ep.Addr().Unmap().IsLoopback() || local == nil {
		return false
	}
	for _, p := range local {
		if p.Contains(ep.Addr().Unmap()) {
			return false
		}
	}
	return true
}

// privateIngressWords is the one sentence status and doctor print.
func privateIngressWords(c localapi.ClusterStatus) string {
	ep, _ := netip.ParseAddrPort(c.Server.Endpoint)
	return fmt.Sprintf("%s's ingress address %s is private: it is reachable only from the cluster's own network, and this machine is not on it",
		nodeOr(c.Server.NodeID), ep.Addr())
}

// privateIngressFix is what to do about it.
func privateIngressFix(c localapi.ClusterStatus) string {
	return fmt.Sprintf("connect from the cluster's own network, or give the node a reachable ingress address: runos nodes ingress %s --cid %s --ingress-ip <reachable-ip>",
		nodeOr(c.Server.NodeID), c.CID)
}

func nodeOr(nid string) string {
	if nid == "" {
		return "<nid>"
	}
	return nid
}

// awayFromPrivate: c's server does not answer and its ingress address is
// private on a network this machine is not on (privateingress.go).
func (d *doctorCtx) awayFromPrivate(c localapi.ClusterStatus) bool {
	if c.PeerUp { // it answers (over UDP or the relay): the address is reachable
		return false
	}
	local, err := d.sys.LocalAddrs()
	if err != nil {
		return false
	}
	return awayFromPrivate(c, local)
}
